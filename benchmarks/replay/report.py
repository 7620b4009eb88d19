"""Write the transfer benchmark's results: transfer.json, transfer.md and transfer.png."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

ARM_LABELS = {
    "cold": "cold (retrieval off)",
    "transfer": "transfer (other tasks only)",
    "same_task_prior": "same-task prior (NOT cross-task)",
}

STYLES = {"cold": "-", "transfer": "--", "same_task_prior": "-."}


def _num(value: float, digits: int = 0) -> str:
    if math.isinf(value):
        return "> budget"
    return f"{value:.{digits}f}"


def _spread(stats: dict[str, Any], digits: int = 0) -> str:
    text = f"{_num(stats['median'], digits)} [{_num(stats['q1'], digits)}–" \
           f"{_num(stats['q3'], digits)}]"
    if stats["reached"] < stats["n"]:
        text += f" ({stats['reached']}/{stats['n']} reached)"
    return text


def write_json(payload: dict[str, Any], path: Path) -> None:
    def clean(value: Any) -> Any:  # JSON has no infinity: censored values become null
        if isinstance(value, float) and math.isinf(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    path.write_text(json.dumps(clean(payload), indent=1) + "\n")


def write_markdown(payload: dict[str, Any], path: Path, plot_name: str) -> None:
    cfg = payload["config"]
    lines = [
        "# Transfer benchmark (replay of measured candidate spaces)", "",
        f"Command: `{payload['command']}`  ",
        f"Replayed on {payload['host']} — no GPU was used by the replay; every time below is "
        "a GPU time recorded in the space files (listed per task).", "",
        f"Budget: {cfg['budget']} evaluations per run (the starting kernel included, the "
        f"final sweep excluded), {cfg['repeats']} repeats per arm with seeds "
        f"0..{cfg['repeats'] - 1}, offline agent (epsilon {cfg['epsilon']}), patience = "
        "budget. Columns: median [IQR] over repeats. *to 95%*: evaluations until the best "
        "time so far is within 95% of the best known (time ≤ best / 0.95). *to grid+3%*: "
        "evaluations until within 3% of the grid's best measured time. *speedup*: naive "
        "default config time / time of the kernel the loop kept (its min-noise rule may keep "
        "a slightly slower one than the fastest it saw). *unmeasured*: evaluations the space "
        "could not score (correct but untimed, or absent) — scored as unknown, never as "
        "fast.", "",
        "| task | arm | experiences | to 95% | to grid+3% | speedup vs naive | evaluations "
        "| unmeasured / failed | winner (most frequent) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for task, entry in payload["tasks"].items():
        for arm, summary in entry["arms"].items():
            winner = next(iter(summary["winners"]), "-")
            lines.append(
                f"| {task} | {ARM_LABELS.get(arm, arm)} | {entry['store_sizes'].get(arm, 0)} "
                f"| {_spread(summary['to_95'])} | {_spread(summary['to_grid_3pct'])} "
                f"| {_spread(summary['final_speedup'], 3)} | {_spread(summary['evaluations'])} "
                f"| {summary['unmeasured']} / {summary['failed']} of "
                f"{summary['total_evaluations']} | `{winner}` |")
    lines += ["", "## Brute force: the exhaustive grid vs the guided run", "",
              "| task | grid size | timed / failed / untimed / absent | grid best (ms) "
              "| best vs naive | configs within 3% | random order, expected evals "
              "| transfer run, evals to grid+3% | same-task prior, evals to grid+3% |",
              "|---|---|---|---|---|---|---|---|---|"]
    for task, entry in payload["tasks"].items():
        bf = entry["brute_force"]
        arms = entry["arms"]
        guided = {a: _spread(arms[a]["to_grid_3pct"]) if a in arms else "-"
                  for a in ("transfer", "same_task_prior")}
        random = bf["random_order_expected"]
        lines.append(
            f"| {task} | {bf['grid_size']} | {bf['timed']} / {bf['failed']} / "
            f"{bf['untimed']} / {bf['absent']} | {bf['best_ms']:.4f} "
            f"| {bf['best_speedup_vs_default']:.3f}x | {bf['within_3pct']} "
            f"| {random:.1f} | {guided['transfer']} | {guided['same_task_prior']} |"
            if random else f"| {task} | {bf['grid_size']} | - | - | - | - | - | - | - |")
    lines += ["", "## Data and caveats", ""]
    for task, entry in payload["tasks"].items():
        lines.append(f"- **{task}**: {entry['space']}")
        lines += [f"  - {note}" for note in entry["notes"]]
    lines += [f"- {note}" for note in payload["notes"]]
    lines += ["", f"![best so far vs evaluations]({plot_name})", ""]
    path.write_text("\n".join(lines))


def write_plot(payload: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(payload["tasks"])
    cols = min(3, max(1, len(tasks)))
    rows = max(1, -(-len(tasks) // cols))
    fig, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 4 * rows), squeeze=False)
    for ax in list(axes.flat)[len(tasks):] if tasks else []:
        ax.set_visible(False)  # the unused cells of the last row
    for ax, task in zip(axes.flat, tasks, strict=False):
        for arm, curve in payload["tasks"][task]["curves"].items():
            x = curve["evaluation"]
            ax.plot(x, curve["median"], label=ARM_LABELS.get(arm, arm), drawstyle="steps-post",
                    linestyle=STYLES.get(arm, "-"), linewidth=2)  # equal arms stay visible
            ax.fill_between(x, curve["q1"], curve["q3"], alpha=0.2, step="post")
        ax.axhline(0.95, color="grey", linestyle=":", linewidth=1)
        ax.set_title(f"{task}: best so far (median, IQR band)")
        ax.set_xlabel("evaluations")
        ax.set_ylabel("best known time / best so far")
        ax.set_ylim(0, 1.05)
        ax.legend(fontsize=8, loc="lower right")
    if not tasks:
        axes[0][0].text(0.5, 0.5, "no measured space", ha="center")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
