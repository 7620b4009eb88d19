"""What the red-team rounds' tests share: a cheat still open, and a probe's report."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest


def still_open(reason: str) -> pytest.MarkDecorator:
    """A plant that passes the judge: a strict xfail, with how it gets through."""
    return pytest.mark.xfail(strict=True, reason=reason)


def report_of(result) -> str:
    """What an escape probe said: its exception's text and the worker's output tails."""
    artifacts = result.artifacts or {}
    return "\n".join([result.error_message or "", str(artifacts.get("stdout_tail", "")),
                      str(artifacts.get("stderr_tail", ""))])


def escaped(report: str) -> list[str]:
    """The report's lines that say something got out (round 9's report probe writes its
    line into the report's text, after a prefix)."""
    return [line for line in report.splitlines()
            if line.lstrip().startswith("ESCAPED") or "ESCAPED: report rewritten" in line]


def judged_as_users_get_it(task: str, source: str, kind: str, behind: str | None = None
                           ) -> None:
    """A cheat through the judge with the source rules on: refused, with ``kind``.
    ``behind``: the kind the layers behind the allow-list give with it off, where the
    allow-list now refuses a plant they caught first (each layer must still hold alone)."""
    from kernelkb.optimizer.sandbox import evaluate

    for refuse, want in ((True, kind), (False, behind)):
        if want is None:
            continue
        result = evaluate(task, source, shapes="auto", seeds=1, timeout_s=900,
                          refuse_imports=refuse)
        assert result.error_kind != "timeout", result.error_message
        assert not result.ok, "the plant passed the judge"
        assert result.error_kind == want, (refuse, result.error_kind, result.error_message)


def probe(source: str, task: str = "rmsnorm"):
    """An escape probe behind the allow-list (it imports os and subprocess): its result and
    report; a probe raises its report, so it is never ok."""
    from kernelkb.optimizer.sandbox import evaluate

    result = evaluate(task, source, shapes="auto", seeds=1, timeout_s=900, refuse_imports=False)
    report = report_of(result)
    assert "launcher refused" not in report, report
    assert not result.ok, "a probe raises its report: it is never ok"
    return result, report


def host_layer(prefix: str, folder_mode: int, file_mode: int) -> tuple[Path, Path]:
    """A host's trusted compile layer where the user cache folder puts it, under a fresh
    HOME (a folder the jail hides), holding one kernel: (home, layer)."""
    home = Path(tempfile.mkdtemp(prefix=prefix))
    layer = home / ".cache" / "kernelkb" / "triton-trusted"
    (layer / "KEY").mkdir(parents=True)
    (layer / "KEY" / "kernel.cubin").write_text("compiled outside")
    for folder in (home, home / ".cache", home / ".cache" / "kernelkb", layer, layer / "KEY"):
        os.chmod(folder, folder_mode)
    os.chmod(layer / "KEY" / "kernel.cubin", file_mode)
    return home, layer
