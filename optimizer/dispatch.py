"""Dispatch tables: the best configuration per regime and GPU, as the exported kernel ships them.

Form (``kernelkb.dispatch/1``, a JSON file beside the exported module)::

    {"format": "kernelkb.dispatch/1", "task": "softmax", "dtype": "float16",
     "rule": {"dims": ["cols"], "inputs": [[0, 1]], "classes": [["short_rows", 2048], ...],
              "reason": "..."},
     "gpus": {"NVIDIA H200": {"facts": {"arch": "sm_90", "sm_count": 132, ...},
              "regimes": {"short_rows": {"config": {...}, "time_ms": ..., "start_ms": ...,
                                         "shapes": [...], "timed": true, "run_id": ...,
                                         "measured_at": ..., "triton_version": ...}}}}}

The selection at call time (and its fallbacks) is ``kernels/dispatch_runtime.py``; this
module builds a table from a run, reads and checks one, and merges tables from several
GPUs (``kernelkb dispatch merge``).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kernelkb.kernels.base import Task
from kernelkb.kernels.dispatch_runtime import DISPATCH_FORMAT, dispatch_check

MERGE_RULES = (
    "tables merge only for the same task and the same regime rule (else: an error, "
    "nothing written); an entry only one table has is kept as it is; for the same GPU and "
    "regime: a GPU-timed entry beats an untimed one (CPU interpreter: correctness only); "
    "two timed entries on the same shapes: the faster wins; on different shapes: the "
    "later measurement wins; the same configuration: kept once, the faster figure; "
    "every replaced entry is listed under 'conflicts'")


def new_table(task: Task, dtype: str) -> dict[str, Any]:
    return {"format": DISPATCH_FORMAT, "task": task.name, "dtype": dtype,
            "rule": task.regimes.rule(), "gpus": {}}


def gpu_facts(env: Any) -> dict[str, Any]:
    """What the runtime compares GPUs by (dispatch_runtime.dispatch_gpu_order), plus the
    figures a reader wants: from the run's Environment."""
    return {k: getattr(env, k, None) for k in ("arch", "sm_count", "mem_bandwidth_gbps",
                                               "smem_per_sm_kib", "peak_tflops", "vendor")}


def entry(config: dict[str, Any], *, shapes: list[str], timed: bool,
          time_ms: float | None, start_ms: float | None, run_id: str, env: Any,
          source: str | None = None) -> dict[str, Any]:
    """One table entry: the configuration and where its figures come from."""
    item: dict[str, Any] = {
        "config": dict(config), "timed": timed, "time_ms": time_ms, "start_ms": start_ms,
        "speedup_vs_start": round(start_ms / time_ms, 4) if time_ms and start_ms else None,
        "shapes": list(shapes), "run_id": run_id,
        "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "triton_version": getattr(env, "triton_version", None),
        "torch_version": getattr(env, "torch_version", None)}
    if source:
        item["source"] = source
    return item


def add_gpu(table: dict[str, Any], env: Any, regimes: dict[str, dict[str, Any]]) -> None:
    table["gpus"][env.gpu_name] = {"facts": gpu_facts(env), "regimes": dict(regimes)}


TABLE_BYTES = 64 * 2**20  # a table of every GPU, task and regime is well under a megabyte


def write_table(table: dict[str, Any], path: Path) -> Path:
    dispatch_check(table)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(table, indent=1, sort_keys=False) + "\n")
    return path


def read_table(path: Path) -> dict[str, Any]:
    """A table from a file; ValueError naming the file and the problem (a device such as
    /dev/zero, or a file past TABLE_BYTES, is refused before it is read)."""
    path = Path(path)
    try:
        if not path.is_file():
            raise ValueError("not a regular file")
        if path.stat().st_size > TABLE_BYTES:
            raise ValueError(f"over {TABLE_BYTES // 2**20} MiB: not a dispatch table")
        table = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError) as err:  # JSON and UTF-8 errors included
        raise ValueError(f"{path}: cannot read a dispatch table ({err})") from None
    try:
        return dispatch_check(table)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None


def _wins(new: dict[str, Any], old: dict[str, Any]) -> bool:
    """Whether ``new`` replaces ``old`` for the same GPU and regime (MERGE_RULES)."""
    if bool(new.get("timed")) != bool(old.get("timed")):
        return bool(new.get("timed"))
    if new.get("timed") and sorted(new.get("shapes", [])) == sorted(old.get("shapes", [])):
        if new.get("time_ms") is not None and old.get("time_ms") is not None:
            return new["time_ms"] < old["time_ms"]
    return str(new.get("measured_at") or "") > str(old.get("measured_at") or "")


def merge_tables(tables: list[dict[str, Any]]) -> dict[str, Any]:
    """One table from several (MERGE_RULES); ValueError when they cannot merge."""
    if not tables:
        raise ValueError("nothing to merge")
    first = tables[0]
    for other in tables[1:]:
        if other["task"] != first["task"]:
            raise ValueError(f"cannot merge tables of different tasks: {first['task']} and "
                             f"{other['task']}")
        if other["rule"] != first["rule"]:
            raise ValueError(f"cannot merge {first['task']} tables whose regimes differ "
                             f"({first['rule']['classes']} vs {other['rule']['classes']}): "
                             "a configuration is only comparable within one regime")
    merged = {"format": DISPATCH_FORMAT, "task": first["task"], "dtype": first.get("dtype"),
              "rule": first["rule"], "gpus": {}, "merge_rules": MERGE_RULES, "conflicts": []}
    for table in tables:
        for gpu, item in table["gpus"].items():
            slot = merged["gpus"].setdefault(gpu, {"facts": item.get("facts", {}),
                                                   "regimes": {}})
            for regime, new in item["regimes"].items():
                old = slot["regimes"].get(regime)
                if old is None:
                    slot["regimes"][regime] = new
                    continue
                if old["config"] == new["config"] and old.get("source") == new.get("source"):
                    if _wins(new, old):
                        slot["regimes"][regime] = new
                    continue
                keep, drop = (new, old) if _wins(new, old) else (old, new)
                slot["regimes"][regime] = keep
                merged["conflicts"].append({"gpu": gpu, "regime": regime,
                                            "kept": keep["config"], "dropped": drop["config"],
                                            "dropped_run": drop.get("run_id")})
    return dispatch_check(merged)
