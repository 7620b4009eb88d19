"""The end-of-run report: markdown plus PNG plots (matplotlib, Agg backend, no display).

Plots: time per iteration (coloured by verdict), best-so-far curve, per-shape speedup of
the best kernel over the starting kernel. Without GPU timing (the CPU interpreter) the
plots say so instead of showing numbers that would mislead.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

from kernelkb.kernels.dtypes import DTYPES
from kernelkb.kernels.shared.vocabulary import Verdict

if TYPE_CHECKING:
    from kernelkb.optimizer.loop import RunResult

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

_COLOURS: dict[str, str] = {
    Verdict.improved: "tab:green", Verdict.neutral: "tab:gray", Verdict.regressed: "tab:orange",
    Verdict.incorrect: "tab:red", Verdict.failed: "black", Verdict.invalid: "tab:purple"}


def write_report(result: RunResult, out_dir: Path, *, title_note: str = "") -> Path:
    """Write report.md and its PNGs into ``out_dir``; returns the markdown's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    timed = any(r.time_ms is not None for r in result.rounds)
    path = out_dir / "report.md"
    if not result.by_regime:
        path.write_text(_markdown(result, timed, title_note, _plots(result, timed, out_dir)))
        return path
    lines = _head(result, timed, title_note) + regime_lines(result)
    for regime, sub in result.by_regime.items():
        sub_timed = any(r.time_ms is not None for r in sub.rounds)
        plots = _plots(sub, sub_timed, out_dir, suffix=f"_{regime}")
        lines += ["", f"# Regime {regime}", ""]
        lines += ["#" + line if line.startswith("## ") else line for line in _body(sub, plots)]
    path.write_text("\n".join(lines))
    return path


def _plots(result: RunResult, timed: bool, out_dir: Path, suffix: str = "") -> list[str]:
    plots = {f"time_per_iteration{suffix}.png": _plot_times(result, timed),
             f"best_so_far{suffix}.png": _plot_best(result, timed),
             f"shape_speedup{suffix}.png": _plot_shapes(result)}
    for name, fig in plots.items():
        fig.savefig(out_dir / name, dpi=100, bbox_inches="tight")
        plt.close(fig)
    return list(plots)


def regime_lines(result: RunResult) -> list[str]:
    """The per-regime summary: shapes, rounds, stop, start and best time over the
    regime's sweep, the best configuration; then the regimes left untuned."""
    task = result.task
    lines = ["", "## Per regime", "", f"Regimes of {task.name}: "
             + ", ".join(f"{name} (up to {bound})" if bound is not None else name
                         for name, bound in task.regimes.classes)
             + f" of {' x '.join(task.regimes.dims) or 'nothing'}; why: {task.regimes.reason}. "
             "Each regime was tuned on its own shapes, with its share of the budget; the "
             "exported kernel dispatches between the best configurations.", "",
             "| regime | sweep shapes | rounds | stopped by | start (ms) | best (ms) | "
             "vs start | best configuration |", "|---|---|---:|---|---:|---:|---:|---|"]
    from kernelkb.optimizer.experience import task_config

    for regime, sub in result.by_regime.items():
        start, best = sub.start_sweep, sub.best_sweep
        start_ms, best_ms, ratio = "-", "-", "-"
        if best is not None and best.timing_available and start is not None:
            start_ms = f"{start.time_ms:.4f}" if start.time_ms else "-"
            best_ms = f"{best.time_ms:.4f}" if best.time_ms else "-"
            if start.time_ms and best.time_ms:
                ratio = f"{start.time_ms / best.time_ms:.2f}x"
        shapes = "; ".join(best.shapes_checked if best is not None else []) or "-"
        config = ", ".join(f"{k}={v}" for k, v in task_config(task, sub.best_source).items())
        lines.append(f"| {regime} | {_cell(shapes, 200)} | {len(sub.rounds) - 1} | "
                     f"{sub.stop_reason.value} | {start_ms} | {best_ms} | {ratio} | "
                     f"{_cell(config, 300)} |")
    for regime, why in result.untuned.items():
        lines.append(f"| {regime} | - | 0 | not tuned: {_cell(why, 120)} | - | - | - | "
                     "(dispatch falls back to the nearest regime) |")
    return lines


def _plot_times(result: RunResult, timed: bool) -> Any:
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for r in result.rounds:
        if r.time_ms is not None:
            ax.scatter(r.iteration, r.time_ms, color=_COLOURS.get(r.verdict, "tab:blue"),
                       label=r.verdict)
        else:
            ax.axvline(r.iteration, color=_COLOURS.get(r.verdict, "tab:blue"), alpha=0.25)
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        unique = dict(zip(labels, handles, strict=True))
        ax.legend(unique.values(), unique.keys(), fontsize=8)
    _untimed_note(ax, timed)
    ax.set(xlabel="iteration", ylabel="time (ms, geomean of shapes)",
           title=f"{result.task.name}: time per iteration")
    return fig


def _plot_best(result: RunResult, timed: bool) -> Any:
    fig, ax = plt.subplots(figsize=(7, 3.5))
    points = [(r.iteration, r.best_ms) for r in result.rounds if r.best_ms is not None]
    if points:
        ax.step(*zip(*points, strict=True), where="post", color="tab:green")
    _untimed_note(ax, timed)
    ax.set(xlabel="iteration", ylabel="best time so far (ms)",
           title=f"{result.task.name}: best so far")
    return fig


def _plot_shapes(result: RunResult) -> Any:
    fig, ax = plt.subplots(figsize=(7, 3.5))
    speedups = shape_speedups(result)
    if speedups:
        labels = list(speedups)
        colours = ["tab:red" if s in result.regressions else "tab:green" for s in labels]
        ax.bar(range(len(labels)), [speedups[s] for s in labels], color=colours)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize=7)
    _untimed_note(ax, bool(speedups))
    ax.set(ylabel="speedup vs starting kernel", title=f"{result.task.name}: per-shape speedup")
    return fig


def shape_speedups(result: RunResult) -> dict[str, float]:
    best, start = result.best_sweep, result.start_sweep
    if best is None or start is None or not (best.timing_available and start.timing_available):
        return {}
    return {shape: start.timings[shape][0] / med for shape, (med, _) in best.timings.items()
            if shape in start.timings}


def _shapes_by_label(task: Any) -> dict[str, tuple[int, ...]]:
    return {task.shape_label(s): s for s in task.shapes("all")}


def shape_table(result: RunResult) -> list[dict[str, Any]]:
    """Per sweep shape: start and best time, eager time, achieved rate and share of peak."""
    best, start, task = result.best_sweep, result.start_sweep, result.task
    if best is None or not best.timing_available:
        return []
    dtype = DTYPES[result.dtype]
    shapes = _shapes_by_label(task)
    bandwidth = result.env.mem_bandwidth_gbps
    tflops_peak = result.env.peak_tflops
    rows = []
    for label, (median, _) in best.timings.items():
        start_ms = start.timings[label][0] if start and label in start.timings else None
        eager_ms = best.baseline_timings.get(label)
        row: dict[str, Any] = {"shape": label, "best_ms": median, "start_ms": start_ms,
                               "eager_ms": eager_ms, "gbps": None, "tflops": None,
                               "share": None}
        if label in shapes:
            seconds = median * 1e-3
            row["gbps"] = task.bytes_moved(shapes[label], dtype) / seconds / 1e9
            row["tflops"] = task.flops(shapes[label], dtype) / seconds / 1e12
            shares = [row["gbps"] / bandwidth if bandwidth else 0.0,
                      row["tflops"] / tflops_peak if tflops_peak else 0.0]
            row["share"] = max(shares) or None
        rows.append(row)
    return rows


def peer_lines(result: RunResult) -> list[str]:
    """The best kernel against every peer checked and timed in this run, per shape: the
    eager call (do_bench) and the GPU time alone (CUDA-graph replay), the speedup on the
    call figure; dropped peers with their reason; figures under the roofline floor listed
    as failures to explain, never as the best peer."""
    from kernelkb.optimizer.peers import below_floor, best_peer, shape_floor

    peers, best, task = result.peer_timings, result.best_sweep, result.task
    if not peers or best is None or not best.timing_available:
        return []
    names = peers.names()
    peaks = {"mem_bandwidth_gbps": result.env.mem_bandwidth_gbps,
             "peak_tflops": result.env.peak_tflops}
    ours_graph = getattr(best, "graph_timings", None) or {}
    shapes = _shapes_by_label(task)
    lines = ["", "## Against the peers (same run)", "",
             "Each cell: eager call (do_bench, ms) / GPU time alone (CUDA-graph replay, ms), "
             "and in brackets peer call / best kernel call. Every peer was checked against "
             "the reference on the shape before it was timed.", "",
             "| shape | best kernel | " + " | ".join(names) + " | vs best peer |",
             "|---|---:|" + "---:|" * len(names) + "---:|"]
    dropped, failures = [], []
    for label, times in peers.eager.items():
        ours = best.timings.get(label, (None,))[0]
        if ours is None or label not in shapes:
            continue
        floor = shape_floor(task, result.dtype, shapes[label], peaks)
        under = below_floor({**times, "best kernel": ours}, floor)
        failures += [f"{name} on {label}: {ms:.4f} ms < floor {floor:.4f} ms"
                     for name, ms in under.items()]
        top = best_peer(task, result.dtype, shapes[label], times, peaks)
        cells = []
        for name in names:
            if name in peers.dropped.get(label, {}):
                dropped.append(f"{name} on {label}: {peers.dropped[label][name]}")
                cells.append(f"dropped [{len(dropped)}]")
            elif name in times:
                cells.append(f"{_pair(times[name], peers.graph[label].get(name))} "
                             f"({times[name] / ours:.2f}x)"
                             + (" BELOW FLOOR" if name in under else ""))
            else:
                cells.append("-")
        versus = f"{top[1] / ours:.2f}x ({top[0]})" if top else "-"
        lines.append(f"| {label} | {_pair(ours, ours_graph.get(label))} | "
                     + " | ".join(cells) + f" | {versus} |")
    lines += ["", "(x) = peer call time / best kernel call time: above 1 the optimized "
              "kernel is faster. GPU time of the best kernel: '-' where the sandbox did not "
              "replay it from a graph."]
    lines += ["", "Peers: " + "; ".join(f"**{n}**: {how}" for n, how in peers.how.items())]
    if dropped:
        lines += ["", "Dropped (wrong or cannot run; not timed):", ""]
        lines += [f"{i}. {_cell(text, 400)}" for i, text in enumerate(dropped, 1)]
    if failures:
        lines += ["", "**Failures to explain** (faster than the roofline floor allows; "
                  "never the best peer):", ""] + [f"- {f}" for f in failures]
    return lines


def _pair(call_ms: float | None, graph_ms: float | None) -> str:
    def ms(value: float | None) -> str:
        return f"{value:.4f}" if value is not None else "-"

    return f"{ms(call_ms)} / {ms(graph_ms)}"


def _table_row(row: dict[str, Any], regression: bool) -> str:
    def ms(value: float | None) -> str:
        return f"{value:.4f}" if value is not None else "-"

    def ratio(num: float | None, den: float | None) -> str:
        return f"{num / den:.2f}x" if num is not None and den else "-"

    rate = "-"
    if row["gbps"] is not None:
        rate = f"{row['gbps']:.0f} GB/s, {row['tflops']:.1f} TFLOP/s"
    share = f"{row['share']:.0%}" if row["share"] is not None else "-"
    flag = " **REGRESSION**" if regression else ""
    return (f"| {row['shape']} | {ms(row['start_ms'])} | {ms(row['best_ms'])} | "
            f"{ratio(row['start_ms'], row['best_ms'])}{flag} | {ms(row['eager_ms'])} | "
            f"{ratio(row['eager_ms'], row['best_ms'])} | {rate} | {share} |")


def _untimed_note(ax: Any, timed: bool) -> None:
    if not timed:
        ax.text(0.5, 0.5, "nothing was timed: no GPU\n(the CPU interpreter checks "
                "correctness only)",
                ha="center", va="center", transform=ax.transAxes, color="gray")


def _markdown(result: RunResult, timed: bool, note: str, plots: list[str]) -> str:
    return "\n".join(_head(result, timed, note) + _body(result, plots))


def _head(result: RunResult, timed: bool, note: str) -> list[str]:
    env, best = result.env, result.best_result
    lines = [f"# Optimization report: {result.task.name} ({result.dtype})", ""]
    if note:
        lines += [note, ""]
    lines += [
        f"- run id: `{result.run_id}`",
        f"- hardware: {env.gpu_name} ({env.arch}), Triton {env.triton_version}, "
        f"torch {env.torch_version}",
        f"- rounds: {len(result.rounds) - 1} after the baseline; stopped by "
        f"**{result.stop_reason.value}**"
        + (f" ({_cell(result.failure, 400)})" if getattr(result, "failure", None) else ""),
        f"- experiences written: {len(result.records)}; retrieved from earlier runs: "
        f"{len(result.retrieved_ids)}",
    ]
    if result.by_regime:
        lines.append(f"- regimes tuned: {', '.join(result.by_regime)}"
                     + (f"; not tuned: {', '.join(result.untuned)}" if result.untuned else ""))
    elif timed and best.time_ms is not None and result.rounds[0].time_ms:
        lines.append(f"- best: {best.time_ms:.4f} ms vs start {result.rounds[0].time_ms:.4f} ms "
                     f"= {result.rounds[0].time_ms / best.time_ms:.2f}x")
    elif not timed:
        lines.append("- timing: none. Nothing was timed (CPU interpreter: correctness only); "
                     "the time column below is empty and the plots say so")
    measured = measurement_line(result)
    if measured:
        lines.append(measured)
    if result.table_path is not None:
        lines.append(f"- dispatch table: `{result.table_path.name}` (regime -> configuration "
                     "on this GPU), used by the exported kernel")
    return lines


def _body(result: RunResult, plots: list[str]) -> list[str]:
    lines = ["", "## Rounds", "", "| # | kind | edit | why (the agent's rationale) | verdict "
              "| time (ms) | note |", "|---|---|---|---|---|---|---|"]
    for r in result.rounds:
        time_ms = f"{r.time_ms:.4f}" if r.time_ms is not None else "-"
        lines.append(f"| {r.iteration} | {r.kind} | {_cell(r.summary, 100)} | "
                     f"{_cell(r.rationale, 100)} | "
                     f"{r.verdict}{' (new best)' if r.improved else ''} | {time_ms} | "
                     f"{_cell(r.message, 120)} |")
    lines += _sweep_lines(result)
    lines += _bucket_lines(result)
    lines += ["", *[f"![{p}]({p})" for p in plots], ""]
    return lines


def _bucket_lines(result: RunResult) -> list[str]:
    """The exported table's learned buckets, with their measured shapes and peers."""
    from kernelkb.optimizer.dispatch import read_table
    from kernelkb.optimizer.learned_buckets import bucket_lines

    path = getattr(result, "table_path", None)
    return bucket_lines(read_table(path)) if path is not None and path.exists() else []


def _sweep_lines(result: RunResult) -> list[str]:
    """The shape sweep of the best kernel against the start, and the peers."""
    lines = ["", "## Shape sweep of the best kernel vs the start", ""]
    sweep = result.best_sweep
    if sweep is None:
        lines.append("(no sweep)")
    else:
        lines.append(sweep_line(sweep))
        rows = shape_table(result)
        if rows:
            lines += ["", "| shape | start (ms) | best (ms) | vs start | reference (ms) | "
                      "vs reference | achieved | share of peak |", "|---|---:|---:|---:|---:|---:|"
                      "---:|---:|"]
            lines += [_table_row(row, row["shape"] in result.regressions) for row in rows]
            lines += ["", "Reference: the task's PyTorch reference in eager mode (it accumulates "
                      "in fp32, so it can be slower than the framework's own fused op, which "
                      "is the peers' 'eager').", _peak_note(result.env)]
        lines += peer_lines(result)
    return lines


def sections_markdown(result: RunResult) -> str:
    """The sweep and peer tables as the report has them (a multi-regime run: under each
    regime's heading), for the run file the pages read."""
    if not result.by_regime:
        return "\n".join(_sweep_lines(result)).strip()
    lines: list[str] = []
    for regime, sub in result.by_regime.items():
        lines += ["", f"# Regime {regime}"]
        lines += ["#" + line if line.startswith("## ") else line for line in _sweep_lines(sub)]
    return "\n".join(lines).strip()


def measurement_line(result: RunResult) -> str | None:
    """How the verdicts were measured and what the noise floor was (None untimed)."""
    runs = [result, *getattr(result, "by_regime", {}).values()]
    evals = [e for r in runs for e in (r.best_sweep, r.start_sweep, r.best_result)
             if e is not None and getattr(e, "timing_available", False)]
    if not evals:
        return None
    floors = sorted({e.comparison.noise_floor for e in evals if e.comparison})
    settled = next((e.settle for e in evals if getattr(e, "settle", None)), None)
    line = ("- verdicts: interleaved GPU-time comparisons with the incumbent, 95% intervals, "
            f"noise floor {', '.join(f'{f:.0%}' for f in floors)}" if floors else
            "- verdicts: no interleaved comparison was made (figures only)")
    if settled:
        line += (f"; the GPU settled in {settled['seconds']:.1f} s before timing (a reference "
                 f"burst {settled['first_burst_ms']:.3g} ms at first, {settled['burst_ms']:.3g} "
                 f"ms steady{'' if settled['settled'] else ', NOT steady at the cap'})")
    return line


def sweep_line(sweep: Any) -> str:
    """One line on the sweep: what was checked, on which shapes, the first failure's kind
    (a timeout is not a wrong result), and whether anything was timed."""
    shapes = list(sweep.shapes_checked)
    listed = f" ({sweep.shape_set}: {', '.join(shapes)})" if shapes else f" ({sweep.shape_set})"
    if sweep.ok:
        head = f"correctness: pass on {len(shapes)} shapes{listed}"
    else:
        first = (sweep.error_message or "").strip().splitlines()[:1]
        head = (f"correctness: FAIL ({sweep.error_kind or 'error'}"
                f"{': ' + first[0][:200] if first else ''}); "
                f"{len(shapes)} shapes checked before it{listed}")
    if not sweep.timing_available:
        why = getattr(sweep, "timing_note", None) or \
            ("it failed before timing" if not sweep.ok else "no timing")
        head += f"; not timed ({why})"
    return head


def _peak_note(env: Any) -> str:
    """Which ceilings "share of peak" divides by: measured on this GPU, or the datasheet's
    (a run that could not measure them) — the two differ by ~12% on an H200's bandwidth."""
    from kernelkb.optimizer.sandbox.hardware import datasheet

    figures = (f"{env.mem_bandwidth_gbps:.0f} GB/s copy, {env.peak_tflops:.0f} TFLOP/s bf16 "
               "matmul" if env.mem_bandwidth_gbps and env.peak_tflops else "none known")
    source = "the datasheet" if (env.mem_bandwidth_gbps, env.peak_tflops) == \
        datasheet(env.gpu_name or "") else "measured on this GPU at the start of the run"
    return (f"Share of peak: of the copy bandwidth or the matmul rate ({figures}; {source}), "
            "whichever the shape is closer to.")


def _cell(text: str | None, width: int) -> str:
    """One markdown table cell: no pipes or line breaks, cut to ``width``."""
    return (text or "").replace("|", "/").replace("\n", " ")[:width]
