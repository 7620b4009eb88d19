"""What the red-team rounds' tests share: a cheat still open, and a probe's report."""

from __future__ import annotations

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
