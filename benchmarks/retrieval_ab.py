"""Does retrieval help on tasks the project does not ship? Optimize runs with and without it.

    python benchmarks/retrieval_ab.py [--tasks layernorm geglu] [--repeats 3] [--budget-s 180]
        [--max-iters 20] [--parallel 1] [--out benchmarks/results] [--work DIR] [--resume JSON]
    python benchmarks/retrieval_ab.py --dry-cpu   # the pipeline end to end on a CPU, untimed

Per task of benchmarks/new_tasks/ (user-style task files, no seeds of their own: only their
related ops' experiences can help) and per repeat, two ``kernelkb optimize TASK --agent
offline --no-peers --seed S`` subprocesses: one with retrieval, one with ``--no-retrieval``.
A repeat's seed is the same for both arms (a paired design). Every run gets its own copy of
a store seeded once with the shipped seeds, so no arm learns from an earlier repeat, or from
the other arm, of the same task.

From each run's records (its journal, or an export of its store where the records were
stored) the chain of measured ratios the loop keeps gives the best-so-far speedup over the
naive kernel after every evaluation (the baseline is evaluation 1); the run's log gives each
evaluation's seconds (the records carry none). Per task the target is the best speedup any
run reached; per run, the evaluations and evaluation seconds until its best-so-far is within
3% of the target. Per arm: median and range over the repeats, and the ratio of the medians
with / without retrieval (the goal: at most 1/2). Writes retrieval_ab_<gpu>.json, .md and
.png into --out, after every run; --resume JSON adds runs to an earlier report (a lent
GPU's limit per command need not hold the whole benchmark).

A speedup is the run's own: its best-so-far over its own baseline measurement, through the
interleaved comparisons (geometric mean over the run's regimes, a regime not yet started
counting 1). Seconds are the evaluations' wall seconds as the loop logs them (what its
budget counts), the final sweeps of regimes already finished included; with --parallel > 1
they include waits for the GPU's timing lock.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kernelkb.kernels.shared.comparison import Comparison
from kernelkb.kernels.shared.stats import geomean
from kernelkb.optimizer.loop import _score as loop_score
from kernelkb.optimizer.policy import PolicyConfig
from kernelkb.optimizer.verdict import MAX_NOISE, MIN_NOISE, relative_spread

ROOT = Path(__file__).resolve().parents[1]

TASKS_DIR = ROOT / "benchmarks" / "new_tasks"
TASKS = ("layernorm", "geglu")
ARMS = ("retrieval", "no_retrieval")
TOLERANCE = 0.03  # "reached": best-so-far within 3% of the best any run found
GOAL = 0.5  # with retrieval at most half the evaluations of without
POLICY_NOISE = PolicyConfig().min_noise  # the CLI runs the policy's default
# Rounds the loop writes without evaluating them (Loop._round: unusable_reply, no_change,
# repeat): no seconds, no evaluation
UNEVALUATED = ("unusable_reply", "no_change", "repeat")
EVALUATED = re.compile(r"optimizer\.loop: evaluated in ([0-9.]+) s")
REGIME = re.compile(r"\bregime (\S+) \(\d+ of \d+\)")  # a progress line of the session
STOPPED = re.compile(r"stopped by (\w+) after (\d+) rounds?")
# what decides where a run's store lives: replaced by the run's own
STORE_VARS = ("KERNELKB_HOME", "KERNELKB_DATA_DIR", "KERNELKB_DB_URL", "KERNELKB_DATABASE_URL",
              "KERNELKB_CHROMA_PATH", "KERNELKB_CHROMA_HOST", "KERNELKB_SERVICE_URL",
              "KERNELKB_RUNS_DIR", "KERNELKB_LOAD_SEEDS_ON_START", "KERNELKB_SEEDS_DIR")


# -- reading a run (pure) ----------------------------------------------------------------
def read_records(text: str) -> list[dict[str, Any]]:
    """Records of a journal or an export (JSONL); a torn last line is skipped, as
    optimizer.writeback.Journal.read does."""
    lines = text.splitlines()
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if number != len(lines):
                raise ValueError(f"line {number}: not JSON") from None
    return records


def run_records(records: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    """The run's own records (an export holds the seeds too), in the order written."""
    return sorted((r for r in records if r.get("run_id") == run_id),
                  key=lambda r: datetime.fromisoformat(r["created_at"].replace("Z", "+00:00")))


def eval_seconds(log: str) -> list[tuple[str | None, list[float]]]:
    """(regime, seconds of each evaluation in order) per regime the run's log tunes: the
    loop's "evaluated in" lines, split at the session's "regime NAME (i of n)" lines. A
    regime's first evaluations are its rounds', the rest its final sweep's."""
    segments: list[tuple[str | None, list[float]]] = [(None, [])]
    for line in log.splitlines():
        if match := REGIME.search(line):
            segments.append((match.group(1), []))
        elif match := EVALUATED.search(line):
            segments[-1][1].append(float(match.group(1)))
    return [s for s in segments if s[0] is not None or s[1]]


def stop_reason(log: str) -> str | None:
    found = STOPPED.findall(log)
    return found[-1][0] if found else None


def _ok(feedback: dict[str, Any]) -> bool:
    return feedback.get("error_kind") is None and \
        feedback.get("stage") in ("correctness", "performance")


def _score(feedback: dict[str, Any], best: float | None) -> float | None:
    """The loop's own score (optimizer.loop._score) on a stored record's feedback."""
    return loop_score(SimpleNamespace(
        ok=_ok(feedback), timing_available=bool(feedback.get("timing_available")),
        suspect=bool(feedback.get("suspect")),
        comparison=Comparison.from_dict(feedback["comparison"])
        if feedback.get("comparison") else None,
        time_ms=feedback.get("time_ms")), best)


def _spread(feedback: dict[str, Any]) -> float:
    return relative_spread({t["shape"]: (t["median_ms"], t.get("iqr_ms"))
                            for t in feedback.get("timings") or []})


def _improved(record: dict[str, Any], score: float | None, best: float | None,
              best_feedback: dict[str, Any] | None) -> bool:
    """What the loop's policy decided: a comparison's verdict; without one, the figures
    against the noise threshold (optimizer.verdict.noise_threshold's spread rule)."""
    if score is None:
        return False
    feedback = record["feedback"]
    if feedback.get("comparison") is not None:
        return record["verdict"] == "improved"
    if best is None:
        return True
    noise = min(MAX_NOISE, max(MIN_NOISE, _spread(feedback) + _spread(best_feedback or {})))
    return best / score > 1.0 + max(noise, POLICY_NOISE)


def curve(records: list[dict[str, Any]],
          segments: list[tuple[str | None, list[float]]] | None = None) -> list[dict[str, Any]]:
    """Per evaluation of a run (records in written order; the baseline is evaluation 1):
    regime, round, verdict, whether it made a new best, configuration, the regime's
    best-so-far time as the loop's policy holds it, the run's best-so-far speedup (None
    untimed) and the evaluation seconds spent up to it (None when the log's evaluations
    do not match the records). Sweeps and rounds never evaluated are no evaluations."""
    regimes = list(dict.fromkeys(_regime(r) for r in records))
    chains: dict[str, dict[str, Any]] = {}
    points: list[dict[str, Any]] = []
    for record in records:
        kind = record["provenance"].get("round_kind")
        feedback = record["feedback"]
        if kind == "sweep" or (feedback.get("stage") == "syntax"
                               and feedback.get("error_kind") in UNEVALUATED):
            continue
        regime = _regime(record)
        new_best = record["iteration"] == 0  # the regime's baseline round
        if new_best:
            score = _score(feedback, None)
            chains[regime] = {"base": score, "best": score, "feedback": feedback}
        else:
            chain = chains[regime]
            score = None if record["verdict"] == "invalid" else _score(feedback, chain["best"])
            new_best = _improved(record, score, chain["best"], chain["feedback"])
            if new_best:
                chain.update(best=score, feedback=feedback)
        points.append({"n": len(points) + 1, "regime": regime,
                       "iteration": record["iteration"], "kind": kind,
                       "verdict": record["verdict"], "new_best": new_best,
                       "config": record["edit"].get("config"),
                       "time_ms": feedback.get("time_ms"), "best_ms": chains[regime]["best"],
                       "speedup": _speedup(chains, regimes), "seconds": None})
    _add_seconds(points, regimes, segments)
    return points


def _regime(record: dict[str, Any]) -> str:
    return record["task"].get("regime") or "all"


def _speedup(chains: dict[str, dict[str, Any]], regimes: list[str]) -> float | None:
    """Geometric mean over the run's regimes of baseline / best so far (1 before a regime
    starts); None if a started regime was never timed."""
    ratios = []
    for regime in regimes:
        chain = chains.get(regime)
        if chain is None:
            ratios.append(1.0)
        elif chain["base"] is None or chain["best"] is None:
            return None
        else:
            ratios.append(chain["base"] / chain["best"])
    return geomean(ratios)


def _add_seconds(points: list[dict[str, Any]], regimes: list[str],
                 segments: list[tuple[str | None, list[float]]] | None) -> None:
    """Cumulative seconds per point: each regime's round evaluations from its log segment,
    then its sweep's (what the segment holds beyond them) before the next regime starts."""
    if not segments:
        return
    by_regime = {name: secs for name, secs in segments if name is not None}
    if [n for n, _ in segments if n is not None] != regimes:
        return  # the log and the records disagree on the regimes: no seconds
    total, cumulative = 0.0, []
    for regime in regimes:
        mine = [p for p in points if p["regime"] == regime]
        secs = by_regime[regime]
        if len(secs) < len(mine):
            return
        for seconds in secs[:len(mine)]:
            total += seconds
            cumulative.append(total)
        total += sum(secs[len(mine):])  # the regime's final sweep
    for point, seconds in zip(points, cumulative, strict=True):
        point["seconds"] = round(seconds, 2)


def reach(points: list[dict[str, Any]], target: float | None,
          tolerance: float = TOLERANCE) -> dict[str, Any] | None:
    """The first evaluation whose best-so-far speedup is within ``tolerance`` of
    ``target``: {"evaluations", "seconds"}; None if the run never got there."""
    if not target:
        return None
    for point in points:
        if point["speedup"] is not None and point["speedup"] * (1 + tolerance) >= target:
            return {"evaluations": point["n"], "seconds": point["seconds"]}
    return None


# -- summarising (pure) ------------------------------------------------------------------
def final_speedup(run: dict[str, Any]) -> float | None:
    points = run.get("points") or []
    return points[-1]["speedup"] if points else None


def stats(values: list[float | None]) -> dict[str, Any]:
    """Median and range over the repeats, a run that never reached counting as +inf (a
    median past the reached runs is None: "not reached")."""
    finite = [v for v in values if v is not None]
    if not values:
        return {"median": None, "min": None, "max": None, "reached": 0, "runs": 0}
    median = statistics.median([math.inf if v is None else v for v in values])
    return {"median": None if math.isinf(median) else median,
            "min": min(finite) if finite else None,
            "max": max(finite) if len(finite) == len(values) else None,
            "reached": len(finite), "runs": len(values)}


def summarise(runs: list[dict[str, Any]], tolerance: float = TOLERANCE) -> dict[str, Any]:
    """Per task: the target (the best final speedup of any run, with its run and
    configuration); per arm the final speedups and the evaluations / seconds to within
    ``tolerance`` of the target; the ratio of the medians with / without retrieval."""
    out: dict[str, Any] = {}
    for task in dict.fromkeys(r["task"] for r in runs):
        mine = [r for r in runs if r["task"] == task]
        timed = [r for r in mine if final_speedup(r) is not None]
        best = max(timed, key=final_speedup, default=None)
        target = final_speedup(best) if best else None
        summary: dict[str, Any] = {
            "target_speedup": target, "tolerance": tolerance,
            "target_run": best and {"arm": best["arm"], "repeat": best["repeat"],
                                    "run_id": best.get("run_id")},
            "target_config": best and best_configs(best["points"]), "arms": {}}
        for arm in ARMS:
            arm_runs = [r for r in mine if r["arm"] == arm]
            if not arm_runs:
                continue
            reached = [reach(r["points"], target, tolerance) for r in arm_runs]
            summary["arms"][arm] = {
                "final_speedup": stats([v for r in arm_runs
                                        if (v := final_speedup(r)) is not None]),
                "evaluations": stats([x and x["evaluations"] for x in reached]),
                "seconds": stats([x and x["seconds"] for x in reached]),
                "per_run": [{"repeat": r["repeat"], "seed": r["seed"],
                             "evaluations_run": len(r["points"]), "stop": r.get("stop"),
                             "final_speedup": final_speedup(r), "reached": x}
                            for r, x in zip(arm_runs, reached, strict=True)]}
        arms = summary["arms"]
        for key in ("evaluations", "seconds"):
            with_, without = (arms.get(a, {}).get(key, {}).get("median") for a in ARMS)
            summary[f"{key}_ratio"] = with_ / without if with_ and without else None
        ratio = summary["evaluations_ratio"]
        with_, without = (arms.get(a, {}).get("evaluations", {}).get("median") for a in ARMS)
        summary["without_at_least"] = at_least = (
            _censored_median(arms[ARMS[1]]["per_run"]) if ARMS[1] in arms else None)
        if ratio is not None:
            summary["goal_met"] = ratio <= GOAL
        elif with_ is not None and without is None and at_least is not None:
            # the median run without retrieval never got there: met only if it would have
            # taken more than twice as long even had it reached on its next evaluation
            summary["goal_met"] = True if with_ <= GOAL * at_least else None
        elif with_ is None and without is not None:
            summary["goal_met"] = False
        else:
            summary["goal_met"] = None
        out[task] = summary
    return out


def _censored_median(per_run: list[dict[str, Any]]) -> float:
    """Median evaluations to the target, a run that never reached counting as its
    evaluations + 1: the least it could have taken (a run cut short after 2 evaluations
    says "more than 2", not "never")."""
    return statistics.median(r["reached"]["evaluations"] if r["reached"]
                             else r["evaluations_run"] + 1 for r in per_run)


def best_configs(points: list[dict[str, Any]]) -> dict[str, Any]:
    """Per regime, the configuration of its last new best (its baseline if none)."""
    return {p["regime"]: p["config"] for p in points if p["new_best"]}


def markdown(report: dict[str, Any]) -> str:
    cfg = report["config"]
    lines = [f"# Does retrieval help? Optimize A/B on {report['gpu']}", "",
             " then ".join(f"`{c}`" for c in report.get("commands", [report["command"]]))
             + f": per task {cfg['repeats']} repeats x 2 arms of "
             f"`kernelkb optimize TASK --agent offline --no-peers --budget-s "
             f"{cfg['budget_s']:g} --max-iters {cfg['max_iters']}` (seed = the repeat's, "
             "shared by the arms), each run with its own copy of a store seeded with the "
             "shipped seeds only. Tasks: benchmarks/new_tasks/ (not shipped; their related "
             "ops' experiences are all retrieval can offer).", "",
             f"Reached: best-so-far speedup within {cfg['tolerance']:.0%} of the best any run "
             "of the task found (the target). Evaluations count the baseline as 1; seconds "
             "are the evaluations' wall seconds from the run's log. Median [range] over the "
             f"repeats; goal: evaluations with retrieval <= {GOAL:g} x without.", "",
             "| task | arm | final speedup | evaluations to target | seconds to target | "
             "reached |", "|---|---|---|---|---|---|"]
    for task, s in report["tasks"].items():
        for arm, a in s["arms"].items():
            cells = [_cell(a["final_speedup"], "x"), _cell(a["evaluations"]),
                     _cell(a["seconds"], " s")] if s["target_speedup"] else ["untimed"] * 3
            lines.append(f"| {task} | {arm} | {' | '.join(cells)} | "
                         f"{a['evaluations']['reached']}/{a['evaluations']['runs']} |")
    lines += ["", "| task | target speedup | evaluations with / without | seconds with / "
              "without | goal (<= 1/2) | target configuration |", "|---|---|---|---|---|---|"]
    for task, s in report["tasks"].items():
        goal = {None: "undecided", True: "met", False: "not met"}[s["goal_met"]]
        target = f"{s['target_speedup']:.3f}x" if s["target_speedup"] else "untimed"
        config = "; ".join(f"{regime}: " + ", ".join(f"{k}={v}" for k, v in (c or {}).items())
                           for regime, c in (s["target_config"] or {}).items()) or "-"
        evaluations = _ratio(s["evaluations_ratio"]) if s["evaluations_ratio"] or not \
            s.get("without_at_least") else f"without: at least {s['without_at_least']:g}"
        lines.append(f"| {task} | {target} | {evaluations} | "
                     f"{_ratio(s['seconds_ratio'])} | {goal} | {config} |")
    lines += ["", "Per run: evaluations run, stop reason, final speedup, evaluations (seconds) "
              "to the target.", ""]
    for task, s in report["tasks"].items():
        for arm, a in s["arms"].items():
            runs = "; ".join(
                f"seed {r['seed']}: {r['evaluations_run']} evals, {r['stop'] or '?'}, "
                + (f"{r['final_speedup']:.3f}x" if r["final_speedup"] else "untimed") + ", "
                + (f"{r['reached']['evaluations']} ({_num(r['reached']['seconds'])} s)"
                   if r["reached"] else "not reached") for r in a["per_run"])
            lines.append(f"- {task} {arm}: {runs}")
    lines += [f"- {note}" for note in report.get("notes", [])]
    return "\n".join(lines) + "\n"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}" if value < 100 else f"{value:.0f}"


def _cell(s: dict[str, Any], unit: str = "") -> str:
    if not s["runs"]:
        return "-"
    median = "not reached" if s["median"] is None else f"{_num(s['median'])}{unit}"
    high = "not reached" if s["max"] is None else _num(s["max"])
    return f"{median} [{_num(s['min'])}, {high}]" if s["min"] is not None else median


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def plot(report: dict[str, Any], path: Path) -> None:
    """Best-so-far speedup against evaluations: a panel per task, a thin line per run,
    the arms in two colours, the target's reach line dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    tasks = list(report["tasks"])
    fig, axes = plt.subplots(1, max(1, len(tasks)), figsize=(6 * max(1, len(tasks)), 4),
                             squeeze=False)
    colours = {"retrieval": "tab:blue", "no_retrieval": "tab:orange"}
    for ax, task in zip(axes[0], tasks, strict=False):
        shown = set()
        for run in (r for r in report["runs"] if r["task"] == task):
            points = [(p["n"], p["speedup"]) for p in run["points"] if p["speedup"] is not None]
            if not points:
                continue
            label = run["arm"] if run["arm"] not in shown else None
            shown.add(run["arm"])
            ax.plot(*zip(*points, strict=True), drawstyle="steps-post", marker=".",
                    markersize=4, color=colours[run["arm"]], linewidth=1, alpha=0.8,
                    label=label)
        target = report["tasks"][task]["target_speedup"]
        if target:
            ax.axhline(target / (1 + report["config"]["tolerance"]), color="gray",
                       linestyle="--", linewidth=0.8, label="within 3% of the best")
        else:
            runs = [r for r in report["runs"] if r["task"] == task]
            why = "no run started" if runs and all(r.get("returncode") for r in runs) \
                else "nothing timed"
            ax.text(0.5, 0.5, why, ha="center", va="center",
                    transform=ax.transAxes, color="gray")
        ax.set(title=task, xlabel="evaluation (baseline = 1)",
               ylabel="best-so-far speedup vs naive")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if shown:
            ax.legend(fontsize=8)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


# -- running (GPU) -----------------------------------------------------------------------
def optimize_command(task: str, arm: str, seed: int, out: Path, budget_s: float,
                     max_iters: int) -> list[str]:
    command = [sys.executable, "-m", "kernelkb", "optimize", task, "--tasks-dir",
               str(TASKS_DIR), "--agent", "offline", "--budget-s", f"{budget_s:g}",
               "--max-iters", str(max_iters), "--no-peers", "--seed", str(seed),
               "--out", str(out), "--verbose"]  # the loop's "evaluated in" lines: the seconds
    return command + (["--no-retrieval"] if arm == "no_retrieval" else [])


def store_env(base: dict[str, str], store: Path) -> dict[str, str]:
    """The environment of a run whose store is ``store`` (the embedded one, not a
    service's or the user's)."""
    env = {k: v for k, v in base.items() if k not in STORE_VARS}
    return {**env, "KERNELKB_DATA_DIR": str(store), "KERNELKB_SERVICE_URL": ""}


SEED_STORE = """
from kernelkb.kb.settings import Settings
from kernelkb.operations import open_for_runs
knowledge, _ = open_for_runs(Settings())
if knowledge is None:
    raise SystemExit("no knowledge store on this host: the retrieval arm would retrieve nothing")
print(knowledge.count(), "experiences seeded")
knowledge.close()
"""


def seed_store(store: Path, env: dict[str, str]) -> str:
    """One store with the shipped seeds, made as optimize makes its own (vectors where
    the host has the embedding model and Chroma), to be copied for every run."""
    done = subprocess.run([sys.executable, "-c", SEED_STORE], cwd=ROOT, capture_output=True,
                          text=True, env=store_env(env, store))
    if done.returncode:
        raise SystemExit(f"seeding the store failed:\n{done.stderr[-3000:]}")
    return done.stdout.strip()


def one_run(task: str, arm: str, repeat: int, seed: int, args: argparse.Namespace,
            work: Path, template: Path, env: dict[str, str]) -> dict[str, Any]:
    """One optimize run on a fresh copy of the seeded store; its curve read back."""
    name = f"{task}-{arm}-r{repeat}"
    store, out = work / "stores" / name, work / "runs" / name
    shutil.copytree(template, store)
    out.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    command = optimize_command(task, arm, seed, out, args.budget_s, args.max_iters)
    with (out / "optimize.log").open("w") as log:
        proc = subprocess.Popen(command, cwd=ROOT, env=store_env(env, store), stdout=log,
                                stderr=subprocess.STDOUT)
        try:
            proc.wait(timeout=args.budget_s * 10 + 1800)
        except subprocess.TimeoutExpired:  # SIGTERM: the loop writes up the rounds done
            proc.terminate()
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    log_text = (out / "optimize.log").read_text(errors="replace")
    run = {"task": task, "arm": arm, "repeat": repeat, "seed": seed,
           "returncode": proc.returncode, "wall_s": round(time.monotonic() - began, 1),
           "stop": stop_reason(log_text), "log": str(out / "optimize.log"), "points": []}
    folders = [p for p in out.iterdir() if p.is_dir()]
    if len(folders) == 1:
        run["run_id"] = folders[0].name
        journal = folders[0] / "journal.jsonl"
        if not journal.exists():  # the records went to the store: export them
            journal = out / "export.jsonl"
            subprocess.run([sys.executable, "-m", "kernelkb", "export", "-o", str(journal)],
                           cwd=ROOT, env=store_env(env, store), capture_output=True)
        if journal.exists():
            records = run_records(read_records(journal.read_text()), run["run_id"])
            run["points"] = curve(records, eval_seconds(log_text))
            if journal.name == "export.jsonl":  # the whole store: keep the run's own
                (out / "records.jsonl").write_text("".join(json.dumps(r) + "\n"
                                                           for r in records))
                journal.unlink()
    shutil.rmtree(store, ignore_errors=True)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budget-s", type=float, default=180.0,
                        help="evaluation seconds per run (optimize --budget-s)")
    parser.add_argument("--max-iters", type=int, default=20)
    parser.add_argument("--parallel", type=int, default=1, help="runs at once")
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--work", type=Path, default=None,
                        help="where the runs (logs, journals, reports) go; default a new "
                             "temporary folder, kept")
    parser.add_argument("--resume", type=Path, default=None,
                        help="an earlier run's JSON: its runs count towards --repeats and "
                             "this run adds the rest (same --budget-s and --max-iters)")
    parser.add_argument("--dry-cpu", action="store_true",
                        help="CPU smoke test: TRITON_INTERPRET=1, 1 repeat, --max-iters 2, "
                             "results into the work folder only (nothing is timed)")
    args = parser.parse_args()
    env = dict(os.environ)
    if args.dry_cpu:
        args.repeats, args.max_iters = 1, 2
        env["TRITON_INTERPRET"] = "1"
        gpu = "cpu"
    else:
        import torch

        if not torch.cuda.is_available():
            raise SystemExit("retrieval_ab needs a CUDA GPU: the CPU interpreter times "
                             "nothing (--dry-cpu checks the pipeline)")
        gpu = torch.cuda.get_device_name(0)
    earlier = json.loads(args.resume.read_text()) if args.resume else {}
    if earlier and (earlier["config"]["budget_s"], earlier["config"]["max_iters"]) != \
            (args.budget_s, args.max_iters):
        raise SystemExit(f"--resume: its runs had --budget-s {earlier['config']['budget_s']} "
                         f"--max-iters {earlier['config']['max_iters']}; give the same")
    runs = [r for r in earlier.get("runs", []) if r["points"]]
    done = {(r["task"], r["arm"], r["repeat"]) for r in runs}
    jobs = [(task, arm, repeat) for repeat in range(args.repeats) for task in args.tasks
            for arm in ARMS  # the arms side by side: both see the same machine states
            if (task, arm, repeat) not in done]
    work = args.work or Path(tempfile.mkdtemp(prefix="retrieval_ab_"))
    work.mkdir(parents=True, exist_ok=True)
    template = work / "seeded_store"
    seeded = seed_store(template, env) if jobs else "none needed"
    print(f"work folder {work}; {len(jobs)} runs to do; seeding a store: {seeded}", flush=True)
    command = "python benchmarks/retrieval_ab.py " + " ".join(sys.argv[1:])
    report = {"gpu": gpu, "command": command,
              "commands": earlier.get("commands", []) + [command],
              "config": {"tasks": list(dict.fromkeys([*earlier.get("config", {}).get(
                             "tasks", []), *args.tasks])),
                         "repeats": args.repeats, "budget_s": args.budget_s,
                         "max_iters": args.max_iters, "parallel": args.parallel,
                         "tolerance": TOLERANCE, "work": str(work)}}
    out = work / "results" if args.dry_cpu else Path(args.out)
    slug = gpu.lower().replace("nvidia ", "").replace(" ", "_")
    lock = threading.Lock()
    with ThreadPoolExecutor(max(1, args.parallel)) as pool:
        futures = [pool.submit(one_run, task, arm, repeat, repeat, args, work, template, env)
                   for task, arm, repeat in jobs]
        for n, future in enumerate(as_completed(futures), 1):
            run = future.result()
            with lock:
                runs.append(run)
                speedup = final_speedup(run)
                last = run["points"][-1] if run["points"] else {}
                print(f"[{n}/{len(jobs)}] {run['task']} {run['arm']} seed {run['seed']}: "
                      f"{len(run['points'])} evaluations, stopped by {run['stop']}, best "
                      + (f"{speedup:.3f}x" if speedup else "untimed")
                      + f", {last.get('seconds')} evaluation s, {run['wall_s']} s wall"
                      + (f", exit {run['returncode']}" if run["returncode"] else ""),
                      flush=True)
                write(report, runs, out, slug)  # a run cut short still leaves the rest
    text = write(report, runs, out, slug)
    print(text)
    print(f"written: {out}/retrieval_ab_{slug}.{{json,md,png}}")


def write(report: dict[str, Any], runs: list[dict[str, Any]], out: Path, slug: str) -> str:
    """The report over ``runs`` as JSON, markdown and plot; returns the markdown."""
    runs = sorted(runs, key=lambda r: (r["task"], r["arm"], r["repeat"]))
    notes = [f"{r['task']} {r['arm']} seed {r['seed']}: exit {r['returncode']}, see {r['log']}"
             for r in runs if r["returncode"] or not r["points"]]
    full = {**report, "tasks": summarise(runs), "notes": notes, "runs": runs}
    out.mkdir(parents=True, exist_ok=True)
    text = markdown(full)
    (out / f"retrieval_ab_{slug}.json").write_text(json.dumps(full, indent=1))
    (out / f"retrieval_ab_{slug}.md").write_text(text)
    plot(full, out / f"retrieval_ab_{slug}.png")
    return text


if __name__ == "__main__":
    main()
