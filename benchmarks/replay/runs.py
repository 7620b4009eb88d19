"""One replayed optimization run: the real loop and offline agent, a replay evaluator.

Everything but the evaluator is the production code path (optimizer.loop.Loop, the
offline agent, the policy, recall through a real LocalKnowledge, verdicts, records), so
what the replay measures is what the optimizer would do on the GPU the space came from.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.replay.evaluator import Call, ReplayEvaluator
from benchmarks.replay.knowledge import MemorySink
from benchmarks.replay.metrics import RunMetrics, run_metrics
from benchmarks.replay.space import Space, config_key
from kernelkb.kb.record import Environment
from kernelkb.kernels.config import header_constants
from kernelkb.optimizer.agents.offline import OfflineAgent
from kernelkb.optimizer.experience import RunInfo
from kernelkb.optimizer.loop import Loop, LoopOptions
from kernelkb.optimizer.policy import Policy, PolicyConfig
from kernelkb.optimizer.writeback import Journal, Writeback

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunTrace:
    task: str
    arm: str
    seed: int
    calls: list[Call]  # the evaluations, in order (the final sweep excluded)
    stop_reason: str
    retrieved: int  # distinct experiences recalled during the run
    metrics: RunMetrics


def replay_run(space: Space, arm: str, seed: int, budget: int, knowledge: Any = None,
               epsilon: float = 0.1) -> RunTrace:
    """Optimize ``space.task`` from its naive kernel for ``budget`` evaluations at most.

    Patience is set to the budget, so every arm spends the same budget unless the agent
    runs out of untried edits (stop reason ``exhausted``).
    """
    if budget < 2:
        raise ValueError("budget must allow the starting kernel and at least one edit")
    default_ms = space.default_ms
    if default_ms is None:
        raise ValueError(f"{space.path.name}: the naive default config is not timed")
    task = space.task
    evaluator = ReplayEvaluator(space)
    sink = knowledge if knowledge is not None else MemorySink()
    run_id = f"replay-{task.name}-{arm}-seed{seed}"
    info = RunInfo(run_id, task, space.dtype, "space:" + ";".join(space.shapes),
                   Environment(**space.env), "offline", None, "benchmarks/transfer.py")
    marks: list[int] = []  # evaluations made when each round was written
    with tempfile.TemporaryDirectory(prefix="kernelkb_replay_") as tmp:
        loop = Loop(task, OfflineAgent(epsilon=epsilon, seed=seed), info=info,
                    evaluator=evaluator,
                    writeback=Writeback(sink, Journal(Path(tmp) / "journal.jsonl")),
                    policy=Policy(PolicyConfig(max_iters=budget - 1, patience=budget)),
                    knowledge=knowledge,
                    options=LoopOptions(dtype=space.dtype, retrieval=knowledge is not None),
                    baseline=evaluator.baseline(),
                    on_round=lambda _: marks.append(len(evaluator.calls)))
        result = loop.run()
    calls = evaluator.calls[: marks[-1]]
    chosen = result.best_result
    names = [p.name for p in (*task.knobs, *task.variants)]
    header = header_constants(result.best_source)
    winner = config_key({n: header[n] for n in names})
    metrics = run_metrics(calls, best_known_ms=space.best_ms, default_ms=default_ms,
                          chosen_ms=chosen.time_ms if chosen.timing_available else None,
                          winner=winner)
    log.info("%s %s seed %d: %d evaluations, to95 %s, speedup %s, %d unmeasured (%s)",
             task.name, arm, seed, metrics.evaluations, metrics.to_95,
             f"{metrics.final_speedup:.3f}" if metrics.final_speedup else None,
             metrics.unmeasured, result.stop_reason.value)
    return RunTrace(task.name, arm, seed, calls, result.stop_reason.value,
                    len(result.retrieved_ids), metrics)
