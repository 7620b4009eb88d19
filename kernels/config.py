"""A configuration is the header of a candidate's source: its ``NAME = literal`` lines.

``header_constants`` reads them and ``set_header_constants`` rewrites them, with the
exported kernels' dispatch runtime's own parser (one reading for both).
"""

from __future__ import annotations

from collections.abc import Mapping

from kernelkb.kernels.dispatch_runtime import HEADER_LINE, dispatch_render, header_literal

ConfigValue = int | float | str | bool
Config = Mapping[str, ConfigValue]


def header_constants(source: str) -> dict[str, ConfigValue]:
    """Top-level ``NAME = literal`` lines of a candidate: its configuration."""
    found: dict[str, ConfigValue] = {}
    for line in source.splitlines():
        match = HEADER_LINE.match(line)
        if not match:
            continue
        text = match.group(2)
        try:
            value = header_literal(text)
        except ValueError:
            continue
        found[match.group(1)] = value
    return found


def set_header_constants(source: str, config: Config) -> str:
    """Rewrite ``NAME = ...`` header lines, keeping their trailing comments (the
    exported kernels' dispatch runtime renders with the same function)."""
    return dispatch_render(source, config)
