"""The start folder off the import path of the sandbox's own processes.

``python -m`` puts the folder it starts in first on ``sys.path``. The sandbox's processes
start in the evaluation's home, which the worker can write; so a module the candidate
wrote there under a standard name (``json.py``, ``hypothesis.py``) would be what the judge
(the jail's PID 1, the worker's parent) imports at its next lazy import, and the
candidate's code would run in the process that writes the verdict (red team 20). Nothing
the sandbox imports lies in its start folder: its package comes by ``PYTHONPATH`` and
site-packages, read-only in the jail.
"""

from __future__ import annotations

import os
import sys


def drop_start_folder() -> list[str]:
    """Remove the start folder ('' and the working directory) from ``sys.path`` before
    any code of the candidate's runs; the entries removed."""
    start = {"", os.path.realpath(os.getcwd())}
    removed = [p for p in sys.path if p == "" or os.path.realpath(p) in start]
    sys.path[:] = [p for p in sys.path if p not in removed]
    return removed
