"""A measured candidate space as data: one row per configuration, timed, failed or not.

The file format is the one benchmarks/measure_space.py writes. A space may be partial
(an interrupted lease): a row that passed the correctness check but carries no
``times_ms`` is *untimed*, and a configuration with no row at all is *absent*. Both are
"unmeasured" to the replay, which must say so rather than guess.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelkb.kernels.base import Task
from kernelkb.kernels.config import ConfigValue
from kernelkb.kernels.discovery import get_task

REQUIRED = ("task", "dtype", "shapes", "default", "env", "baseline_ms", "configs")


def config_key(config: dict[str, ConfigValue]) -> str:
    """The row key measure_space writes: ``NAME=value`` pairs, sorted, comma-joined."""
    return ",".join(f"{k}={v}" for k, v in sorted(config.items()))


@dataclass(frozen=True)
class Space:
    """One task's measured space on one GPU, with the lookups the replay needs."""

    path: Path
    task: Task
    dtype: str
    shapes: tuple[str, ...]  # shape labels of the timed (representative) shapes
    default_key: str
    env: dict[str, Any]
    baseline_ms: dict[str, tuple[float, float]]  # PyTorch eager: label -> (median, iqr)
    rows: dict[str, dict[str, Any]]  # key -> row as measured
    space_size: int  # legal configurations the task declares (the exhaustive grid)
    complete: bool
    date: str = ""
    notes: list[str] = field(default_factory=list)

    def row(self, config: dict[str, ConfigValue]) -> dict[str, Any] | None:
        return self.rows.get(config_key(config))

    @staticmethod
    def is_timed(row: dict[str, Any] | None) -> bool:
        return bool(row and row.get("ok") and row.get("times_ms"))

    def timed(self) -> dict[str, float]:
        """key -> geomean time (ms) of every correct, timed configuration."""
        return {k: float(r["time_ms"]) for k, r in self.rows.items() if self.is_timed(r)}

    @property
    def best_key(self) -> str:
        timed = self.timed()
        if not timed:
            raise ValueError(f"{self.path.name}: no configuration is timed")
        return min(timed, key=timed.__getitem__)

    @property
    def best_ms(self) -> float:
        return self.timed()[self.best_key]

    @property
    def default_ms(self) -> float | None:
        row = self.rows.get(self.default_key)
        return float(row["time_ms"]) if self.is_timed(row) else None

    def counts(self) -> dict[str, int]:
        """How much of the grid is known: timed, failed, untimed (correct) and absent."""
        timed = sum(1 for r in self.rows.values() if self.is_timed(r))
        failed = sum(1 for r in self.rows.values() if not r.get("ok"))
        untimed = len(self.rows) - timed - failed
        return {"grid": self.space_size, "timed": timed, "failed": failed,
                "untimed": untimed, "absent": max(0, self.space_size - len(self.rows))}


def load_space(path: Path) -> Space:
    """Read and check one space file; a malformed file is a ValueError naming the problem."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not JSON ({err})") from None
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise ValueError(f"{path}: missing fields {missing}")
    task = get_task(data["task"])
    names = {p.name for p in (*task.knobs, *task.variants)}
    rows: dict[str, dict[str, Any]] = {}
    default_key = data["default"]
    for i, row in enumerate(data["configs"]):
        config = row.get("config")
        # a space measured before a variant existed: its points ran the first value
        whole = task.complete(config) if isinstance(config, dict) else None
        if whole is None:
            raise ValueError(f"{path}: configs[{i}] has parameters {sorted(config or {})}, "
                             f"the task declares {sorted(names)}")
        if Space.is_timed(row) and set(row["times_ms"]) != set(data["shapes"]):
            raise ValueError(f"{path}: configs[{i}] is timed on {sorted(row['times_ms'])}, "
                             f"not on the space's shapes {data['shapes']}")
        if config_key(config) == data["default"]:
            default_key = config_key(whole)
        rows[config_key(whole)] = {**row, "config": whole}
    baseline = {label: (float(v[0]), float(v[1])) for label, v in
                (data["baseline_ms"] or {}).items()}
    return Space(path=path, task=task, dtype=data["dtype"], shapes=tuple(data["shapes"]),
                 default_key=default_key, env=dict(data["env"]), baseline_ms=baseline,
                 rows=rows, space_size=int(data.get("space_size") or len(list(task.space()))),
                 complete=bool(data.get("complete")), date=str(data.get("date", "")))


def find_spaces(folder: Path, dtype: str | None = None) -> list[Path]:
    """Space files in a folder (``<task>_<dtype>.json``), optionally of one dtype."""
    paths = sorted(Path(folder).glob("*.json"))
    return [p for p in paths if dtype is None or p.stem.endswith(f"_{dtype}")]
