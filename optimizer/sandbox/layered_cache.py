"""The worker's Triton cache: its own folder, over the host's trusted layer.

Why and what fills the layer: trusted_cache.py. Triton loads this class by name
(``TRITON_CACHE_MANAGER``) in the worker, where the layer is a read-only mount.
"""

from __future__ import annotations

import json
import os

from triton.runtime.cache import FileCacheManager

from kernelkb.optimizer.sandbox.trusted_cache import LAYER_ENV

# what this process found in the layer and what it had to build itself (a key looked up
# in neither is compiled next), for the worker's report
READS = {"layer": 0, "own": 0, "missing": 0}


class LayeredCache(FileCacheManager):  # type: ignore[misc]
    """Triton's file cache over the evaluation's own folder, under the trusted layer
    named by ``LAYER_ENV``: a key the layer holds is read from there first, so a
    candidate that writes its own bytes under it (the generated incumbent's key) is
    not served them (red team 12). Writes (and Triton's override and dump folders)
    stay the file cache's own."""

    def __init__(self, key: str, override: bool = False, dump: bool = False) -> None:
        super().__init__(key, override=override, dump=dump)
        layer = os.environ.get(LAYER_ENV, "")
        self.layer = os.path.join(layer, key) if layer and not (override or dump) else ""

    def _layered(self, filename: str) -> str | None:
        path = os.path.join(self.layer, filename) if self.layer else ""
        return path if path and os.path.isfile(path) else None

    def get_file(self, filename: str) -> str | None:
        return self._layered(filename) or super().get_file(filename)

    def get_group(self, filename: str) -> dict[str, str] | None:
        """The group from the layer, else from the own folder (a compiled kernel is one:
        its binary, IRs and metadata)."""
        layered = self._layered_group(filename)
        found = layered if layered is not None else super().get_group(filename)
        READS["layer" if layered is not None else "own" if found is not None else "missing"] += 1
        return found

    def _layered_group(self, filename: str) -> dict[str, str] | None:
        """A group of the layer, its files found there by name (the paths a group records
        are those of the process that wrote it)."""
        path = self._layered(f"__grp__{filename}")
        if path is None:
            return None
        try:
            with open(path) as handle:
                children = json.load(handle)["child_paths"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        found = {name: self._layered(os.path.basename(str(p))) for name, p in children.items()}
        return None if None in found.values() else {k: v for k, v in found.items() if v}
