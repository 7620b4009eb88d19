"""The run folder's ``run.json``: the run's machine-readable state, for the run pages
(kernelkb/web, ``/ui/runs/<run id>``) to read while ``optimize`` runs and after.

The rounds themselves go where they always went (the store, else the journal), as each
round ends; this file adds what neither says: that the run is under way, which candidate
is being evaluated now, when the run last made progress, and at the end what stopped it
and its sweep and peer tables (as Markdown the report writer produced). The pages read
these fields, never the report's prose. It is rewritten whole (a temp file, then an
atomic rename), so a reader never sees half of it, and a failure to write it is logged,
never raised: the pages are a view, the run goes on without it.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kernelkb.kernels.shared.atomic import replaced

log = logging.getLogger(__name__)

FILE = "run.json"


class RunFile:
    def __init__(self, run_dir: Path, run_id: str, task: str) -> None:
        self.path = Path(run_dir) / FILE
        self.state: dict[str, Any] = {"run_id": run_id, "task": task, "state": "running",
                                      "regime": None, "rounds": 0, "candidate": None,
                                      "stop_reason": None, "sections": ""}

    def _write(self) -> None:
        self.state["updated_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with replaced(self.path) as tmp:
                tmp.write_text(json.dumps(self.state), encoding="utf-8")
        except OSError as err:
            log.debug("run file not written (%s)", err)

    def start(self, regime: str | None = None) -> None:
        self.state.update(state="running", regime=regime, candidate=None)
        self._write()

    def evaluating(self, iteration: int, kind: str, summary: str,
                   regime: str | None = None,
                   slots: list[dict[str, Any]] | None = None) -> None:
        """A candidate's evaluation begins; ``slots``: a round on several GPUs, each
        GPU's candidate ({"iteration", "summary", "where"})."""
        self.state["candidate"] = {"iteration": iteration, "kind": kind,
                                   "summary": summary[:300], "regime": regime}
        if slots:
            self.state["candidate"]["slots"] = [
                {"iteration": int(s["iteration"]), "summary": str(s["summary"])[:300],
                 "where": str(s["where"])[:80]} for s in slots]
        self._write()

    def round_done(self) -> None:
        self.state["rounds"] += 1
        self.state["candidate"] = None
        self._write()

    def finish(self, state: str = "finished", *, stop_reason: str | None = None,
               sections: str = "") -> None:
        """The run ended: ``finished`` (with what stopped it and its sweep and peer
        tables) or ``failed``."""
        self.state.update(state=state, candidate=None, stop_reason=stop_reason,
                          sections=sections)
        self._write()
