"""The per-user folders of kernelkb, where platformdirs puts them for the platform.

On a bare GPU host that carries only torch and triton (no platformdirs), the XDG rule
platformdirs applies on Linux, so the floor still imports from the standard library only.
"""

from __future__ import annotations

import os
from pathlib import Path

APP_NAME = "kernelkb"


def user_data() -> Path:
    """Where the store lives by default: ``~/.local/share/kernelkb`` on Linux."""
    try:
        from platformdirs import user_data_path
    except ImportError:
        base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        return Path(base) / APP_NAME
    return user_data_path(APP_NAME, appauthor=False)


def user_cache() -> Path:
    """What can be rebuilt (the exported ONNX graph, the task registry's summary):
    ``~/.cache/kernelkb`` on Linux, under ``XDG_CACHE_HOME`` where that is set."""
    try:
        from platformdirs import user_cache_path
    except ImportError:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(base) / APP_NAME
    return user_cache_path(APP_NAME, appauthor=False)
