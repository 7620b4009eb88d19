"""How often the evaluator's verdicts are wrong, on a GPU: A/A and known-slower pairs.

    python benchmarks/verdict_noise.py [--tasks softmax rmsnorm ...] [--evals 30]
        [--slower 10] [--budget-s 500] [--out benchmarks/results]
    python benchmarks/verdict_noise.py --tasks-dir my_tasks --tasks my_op   (one's own task)

Per task, as the loop judges a candidate (``optimizer.sandbox.evaluate`` with the
incumbent as ``parent`` and ``parent_source``, then ``optimizer.verdict.judge``), each
evaluation its own worker process:
- **A/A**: the naive kernel judged against itself ``--evals`` times. Any verdict other
  than neutral is a false verdict.
- **known slower**: the naive kernel with a padding copy added to every call (10% of its
  input bytes read and written again: strictly more work) judged against the naive
  kernel ``--slower`` times; "regressed" is the right verdict.

Both rules are read off the same evaluations, side by side:
- *interleaved* (the evaluator's rule): the worker's comparison of GPU times, candidate
  and incumbent alternating, with its 95% interval and noise floor (compare.py);
- *separate figures* (the rule before it): the geometric mean of the candidate's call
  times against the incumbent's from its own, earlier evaluation, with the threshold from
  the IQR spread of both (2-10%).

The evaluations use one seed and the sweep's representative shapes (no edge shapes: they
are checked, never timed) to fit a lent GPU's time; ``--budget-s`` stops early and the
report says how many evaluations each figure rests on. Writes verdict_noise_<gpu>.json
and .md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kernelkb.kernels.discovery import add_tasks_dirs, get_task, split_dirs
from kernelkb.kernels.shared.comparison import outcome
from kernelkb.kernels.shared.stats import geomean
from kernelkb.optimizer.sandbox import evaluate
from kernelkb.optimizer.verdict import (
    MAX_NOISE,
    MIN_NOISE,
    judge,
    noise_threshold,
    relative_spread,
)

TASKS = ("softmax", "rmsnorm", "swiglu", "rope", "attention", "matmul")
PAD_SHARE = 0.10

PAD = '''

# --- verdict_noise.py: a known-slower variant (a padding copy added to every call) ---
import torch
import triton
import triton.language as tl


@triton.jit
def _verdict_noise_pad(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


_verdict_noise_buffers = {}
_verdict_noise_run = run


def run(*args):
    out = _verdict_noise_run(*args)
    n = max(1, int(sum(a.numel() * a.element_size() for a in args
                       if hasattr(a, "element_size")) * SHARE))
    device = next(a.device for a in args if hasattr(a, "device"))
    if n not in _verdict_noise_buffers:
        _verdict_noise_buffers[n] = (torch.ones(n, dtype=torch.uint8, device=device),
                                     torch.empty(n, dtype=torch.uint8, device=device))
    src, dst = _verdict_noise_buffers[n]
    _verdict_noise_pad[(triton.cdiv(n, 1024),)](src, dst, n, BLOCK=1024)
    return out
'''


def slower_source(source: str, share: float = PAD_SHARE) -> str:
    """The kernel with a padding copy of ``share`` of its input bytes after every call."""
    return source + PAD.replace("SHARE", repr(share))


def previous_rule(child, parent) -> str:
    """The verdict before the interleaved comparison: call-time figures of two separate
    evaluations, threshold from their IQR spreads, floored at 2% and capped at 10%."""
    if not (child.ok and child.timing_available and parent.timing_available):
        return "untimed"
    labels = list(child.timings)
    geo = [geomean(r.timings[k][0] for k in labels) for r in (child, parent)]
    spread = relative_spread(child.timings) + relative_spread(parent.timings)
    ratio = geo[1] / geo[0]  # one figure each: the interval is the figure itself
    return outcome(ratio, ratio, min(MAX_NOISE, max(MIN_NOISE, spread))).value


def one(task: str, source: str, parent, parent_source: str | None, t0: float
        ) -> tuple[dict, object]:
    began = time.perf_counter()
    if parent is None:
        result = evaluate(task, source, shapes="representative", seeds=1, settle_s=15.0)
        return {"wall_s": round(time.perf_counter() - began, 2), "ok": result.ok,
                "settle": result.settle, "gpu_ms": result.time_ms}, result
    result = evaluate(task, source, shapes="representative", seeds=1, parent=parent,
                      parent_source=parent_source)
    entry = {"wall_s": round(time.perf_counter() - began, 2), "ok": result.ok,
             "t_s": round(began - t0, 1),
             "error": None if result.ok else f"{result.error_kind}: {result.error_message}"}
    if result.ok:
        verdict = judge(result, parent, claimed_gain=False,
                        noise=noise_threshold(result, parent))
        steps = json.loads(result.artifacts.get("wall_s") or "{}")
        entry.update(interleaved=verdict.value, previous=previous_rule(result, parent),
                     comparison={k: v for k, v in (result.comparison.to_dict()
                                                   if result.comparison else {}).items()
                                 if k != "shapes"},
                     gpu_ms=result.time_ms, call_ms=_geo(result.timings),
                     suspect=result.suspect_reasons,
                     settle=result.settle, gpu_phase_s=steps.get("GPU time"),
                     laps=steps, locked_s=round(sum(v for k, v in steps.items()
                                                    if k.startswith(("time ", "GPU t"))), 3),
                     lock_wait_s=json.loads(result.artifacts.get("lock_wait") or "null"))
    return entry, result


def _geo(timings: dict) -> float | None:
    meds = [m for m, _ in timings.values()]
    return geomean(meds) if meds else None


def summarise(rows: list[dict], right: str) -> dict:
    done = [r for r in rows if r.get("ok")]
    out = {"evaluations": len(done), "failed": len(rows) - len(done)}
    for rule in ("interleaved", "previous"):
        verdicts = [r[rule] for r in done]
        out[rule] = {v: verdicts.count(v) for v in sorted(set(verdicts))}
        out[f"{rule}_right_share"] = (sum(v == right for v in verdicts) / len(verdicts)
                                      if verdicts else None)
    ratios = [r["comparison"]["ratio"] for r in done if r.get("comparison")]
    if ratios:
        out["ratio_median"] = statistics.median(ratios)
        out["ratio_range"] = [min(ratios), max(ratios)]
        widths = [r["comparison"]["high"] / r["comparison"]["low"] for r in done
                  if r.get("comparison")]
        out["interval_width_median"] = statistics.median(widths)
        out["rounds_median"] = statistics.median(r["comparison"]["rounds"] for r in done
                                                 if r.get("comparison"))
    calls = [r["call_ms"] for r in done if r.get("call_ms")]
    if calls:
        out["call_ms_range"] = [min(calls), max(calls)]
    out["wall_s_median"] = statistics.median(r["wall_s"] for r in rows) if rows else None
    phases = [r["gpu_phase_s"] for r in done if r.get("gpu_phase_s") is not None]
    out["comparison_s_median"] = statistics.median(phases) if phases else None
    locked = [r["locked_s"] for r in done if r.get("locked_s") is not None]
    out["locked_s_median"] = statistics.median(locked) if locked else None
    return out


def markdown(report: dict) -> str:
    commands = " then ".join(f"`{c}`" for c in report.get("commands", [report["command"]]))
    lines = [f"# Verdict noise on {report['gpu']}", "",
             f"{commands}; {report['evals']} A/A and {report['slower']} known-slower "
             "evaluations a task asked for (each its own worker; one seed, the "
             "representative shapes). Right verdicts: neutral for A/A, regressed for the "
             "slower variant.", "",
             "| task | pair | evaluations | interleaved: verdicts | right | previous rule: "
             "verdicts | right | ratio median [range] | interval width | rounds | "
             "eval s | GPU-locked s | comparison s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for task, pairs in report["tasks"].items():
        for pair, s in pairs.items():
            if pair == "start":
                continue
            share = lambda v: "-" if v is None else f"{v:.0%}"  # noqa: E731
            ratio = (f"{s['ratio_median']:.3f} [{s['ratio_range'][0]:.3f}, "
                     f"{s['ratio_range'][1]:.3f}]") if "ratio_median" in s else "-"
            width = f"{s['interval_width_median']:.3f}" if "interval_width_median" in s else "-"
            lines.append(
                f"| {task} | {pair} | {s['evaluations']} | {_counts(s['interleaved'])} | "
                f"{share(s['interleaved_right_share'])} | {_counts(s['previous'])} | "
                f"{share(s['previous_right_share'])} | {ratio} | {width} | "
                f"{_num(s.get('rounds_median'))} | {_num(s['wall_s_median'])} | "
                f"{_num(s.get('locked_s_median'))} | {_num(s.get('comparison_s_median'))} |")
    early = [r for rows in report.get("rows", {}).values() for pair, es in rows.items()
             for r in es if r.get("ok") and r.get("fresh_machine") and r["t_s"] < 120
             and pair == "aa"]
    if early:
        wrong = sum(r["interleaved"] != "neutral" for r in early)
        lines += ["", f"A/A evaluations in the first 120 s of a run on a freshly started "
                  f"machine (`--fresh-machine`): {len(early)}, of which {wrong} not neutral."]
    return "\n".join(lines) + "\n"


def _counts(counts: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    parser.add_argument("--tasks-dir", action="append", default=[], metavar="DIR",
                        help="a folder of one's own task files, as for `kernelkb "
                             "optimize` (repeatable; adds to KERNELKB_TASKS_DIR)")
    parser.add_argument("--evals", type=int, default=30)
    parser.add_argument("--slower", type=int, default=10)
    parser.add_argument("--budget-s", type=float, default=None)
    parser.add_argument("--parallel", type=int, default=1,
                        help="evaluations at once (their timing phases take turns on the "
                             "GPU's lock; the others' checks and compiles run beside them)")
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--fresh-machine", action="store_true",
                        help="this run starts on a machine just started: its first 120 s of "
                             "A/A verdicts are reported on their own")
    parser.add_argument("--resume", type=Path, default=None,
                        help="an earlier run's JSON: its evaluations count towards --evals "
                             "and --slower, and this run adds the rest")
    args = parser.parse_args()
    add_tasks_dirs([*split_dirs(os.environ.get("KERNELKB_TASKS_DIR")), *args.tasks_dir])
    for task in args.tasks:  # a misspelt or missing task is named before any work
        try:
            get_task(task)
        except KeyError as err:
            raise SystemExit(str(err).strip('"')) from None
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("verdict_noise needs a CUDA GPU: the CPU interpreter times nothing")
    gpu = torch.cuda.get_device_name(0)
    deadline = time.monotonic() + args.budget_s if args.budget_s else math.inf
    t0 = time.perf_counter()
    command = "python benchmarks/verdict_noise.py " + " ".join(sys.argv[1:])
    report = {"gpu": gpu, "command": command, "commands": [command], "evals": args.evals,
              "slower": args.slower, "tasks": {}, "rows": {}}
    earlier = json.loads(args.resume.read_text()) if args.resume else {}
    report["commands"] = earlier.get("commands", [earlier["command"]] if earlier else []) + \
        [command]
    need = {t: _need(earlier.get("rows", {}).get(t), args) for t in args.tasks}
    for i, task in enumerate(args.tasks):
        if not mine_left(need[task]):
            continue  # the earlier run has them all (copied below)
        # the budget left, shared by the tasks left in proportion to what each still needs
        share = sum(mine_left(need[t]) for t in args.tasks[i:]) or 1
        mine = mine_left(need[task])
        task_deadline = min(deadline, time.monotonic() + max(
            1.0, (deadline - time.monotonic()) * mine / share)) if args.budget_s else math.inf
        naive = get_task(task).template
        start, parent = one(task, naive, None, None, t0)
        if not parent.ok:
            raise SystemExit(f"the naive {task} kernel failed: {parent.text}")
        rows = earlier.get("rows", {}).get(task) or {"aa": [], "slower": []}
        plan = [("aa", naive)] * need[task]["aa"] + \
            [("slower", slower_source(naive))] * need[task]["slower"]
        plan = _interleave_plan(plan)
        def job(item, task=task, parent=parent, naive=naive, task_deadline=task_deadline):
            if time.monotonic() > task_deadline:
                return item[0], None
            entry = one(task, item[1], parent, naive, t0)[0]
            entry["fresh_machine"] = args.fresh_machine
            return item[0], entry

        with ThreadPoolExecutor(args.parallel) as pool:
            done = list(pool.map(job, plan))
        skipped = sum(entry is None for _, entry in done)
        if skipped:
            print(f"{task}: {skipped} evaluations left out at the budget", flush=True)
        for pair, entry in done:
            if entry is None:
                continue
            rows[pair].append(entry)
            print(f"{task} {pair} {len(rows[pair])}: {entry.get('interleaved')} "
                  f"(previous rule {entry.get('previous')}) "
                  f"ratio {entry.get('comparison', {}).get('ratio', float('nan')):.3f} "
                  f"{entry['wall_s']} s{'' if entry['ok'] else ' ' + str(entry['error'])[:200]}",
                  flush=True)
        report["tasks"][task] = {"start": start, "aa": summarise(rows["aa"], "neutral"),
                                 "slower": summarise(rows["slower"], "regressed")}
        report["rows"][task] = rows
        save(_with_earlier(report, earlier), Path(args.out))
    report = _with_earlier(report, earlier)
    save(report, Path(args.out))
    print(markdown(report))


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def save(report: dict, out: Path) -> None:
    """Written after every task, so a run stopped at its time limit keeps what it did."""
    out.mkdir(parents=True, exist_ok=True)
    slug = report["gpu"].lower().replace("nvidia ", "").replace(" ", "_")
    (out / f"verdict_noise_{slug}.json").write_text(json.dumps(report, indent=1))
    (out / f"verdict_noise_{slug}.md").write_text(markdown(report))


def _with_earlier(report: dict, earlier: dict) -> dict:
    """The earlier run's tasks this run did not touch, kept as they were."""
    for task, rows in earlier.get("rows", {}).items():
        if task not in report["rows"]:
            report["rows"][task] = rows
            report["tasks"][task] = earlier["tasks"][task]
    return report


def mine_left(need: dict[str, int]) -> int:
    return need["aa"] + need["slower"]


def _need(rows: dict | None, args: argparse.Namespace) -> dict[str, int]:
    rows = rows or {}
    done = {pair: sum(1 for r in rows.get(pair, []) if r.get("ok")) for pair in ("aa", "slower")}
    return {"aa": max(0, args.evals - done["aa"]),
            "slower": max(0, args.slower - done["slower"])}


def _interleave_plan(plan: list) -> list:
    """A/A and slower evaluations alternate, so both see the same machine states."""
    aa = [p for p in plan if p[0] == "aa"]
    slow = [p for p in plan if p[0] == "slower"]
    out = []
    while aa or slow:
        if aa:
            out.append(aa.pop())
        if slow and (len(out) % 3 == 0 or not aa):
            out.append(slow.pop())
    return out


if __name__ == "__main__":
    main()
