"""The run folder's ``live.json``: what a running optimization is doing now, for the live
run page (kb/web, ``/ui/runs/<run id>``) to read while ``optimize`` runs.

The rounds themselves go where they always went (the store, else the journal), as each
round ends; this file adds what neither says: that the run is under way, which candidate
is being evaluated now, and when the run last made progress. It is rewritten whole
(a temp file, then an atomic rename), so a reader never sees half of it, and a failure
to write it is logged, never raised: the page is a view, the run goes on without it.
"""

from __future__ import annotations

import json
import logging
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

FILE = "live.json"


class LiveStatus:
    def __init__(self, run_dir: Path, run_id: str, task: str) -> None:
        self.path = Path(run_dir) / FILE
        self.state: dict[str, Any] = {"run_id": run_id, "task": task, "state": "running",
                                      "regime": None, "rounds": 0, "candidate": None}

    def _write(self) -> None:
        self.state["updated_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{FILE}.tmp")
            tmp.write_text(json.dumps(self.state), encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError as err:
            log.debug("live status not written (%s)", err)

    def start(self, regime: str | None = None) -> None:
        self.state.update(state="running", regime=regime, candidate=None)
        self._write()

    def evaluating(self, iteration: int, kind: str, summary: str,
                   regime: str | None = None) -> None:
        """A candidate's evaluation begins."""
        self.state["candidate"] = {"iteration": iteration, "kind": kind,
                                   "summary": summary[:300], "regime": regime}
        self._write()

    def round_done(self) -> None:
        self.state["rounds"] += 1
        self.state["candidate"] = None
        self._write()

    def finish(self, state: str = "finished") -> None:
        self.state.update(state=state, candidate=None)
        self._write()
