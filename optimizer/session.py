"""One optimization run end to end: set up, loop, sweep, report, export.

The programmatic entry point (the CLI and the tests call it): it builds the run's shared
record fields, the write-back with its journal, the policy and the loop, then writes the
report and exports the best kernel into the run folder.
"""

from __future__ import annotations

import logging
import math
import secrets
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelkb.kb.record import Environment
from kernelkb.kernels.base import Shape
from kernelkb.kernels.discovery import get_task
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.optimizer.agents.base import Agent
from kernelkb.optimizer.experience import RunInfo
from kernelkb.optimizer.export import export_module
from kernelkb.optimizer.loop import Loop, LoopOptions, RoundOutcome, RunResult
from kernelkb.optimizer.policy import Policy, PolicyConfig, StopReason
from kernelkb.optimizer.report import sections_markdown, write_report
from kernelkb.optimizer.resume import Resume
from kernelkb.optimizer.run_file import RunFile
from kernelkb.optimizer.writeback import Journal, Writeback

if TYPE_CHECKING:
    from kernelkb.optimizer.eval_pool import EvalPool
    from kernelkb.retrieval.protocol import Knowledge

log = logging.getLogger(__name__)
progress = logging.getLogger("kernelkb.progress")  # the lines a user of the command reads
# stops that end the whole run, not only the regime they happened in
STOPPED_EARLY = (StopReason.interrupt, StopReason.agent_unavailable)
UNTIMED_NOTE = ("**Nothing in this report was timed.** There is no GPU here: every kernel ran "
                "in Triton's CPU interpreter, which checks correctness only. Times, speedups, "
                "verdicts on speed and the peers need a GPU.")


def new_run_id(task_name: str) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{task_name}-{stamp}-{secrets.token_hex(3)}"


def _peer_timings(task_name: str, options: LoopOptions) -> Any:
    """The peers over the sweep shapes, checked then timed in this run (PeerTimes, or None:
    a failure costs the table, not the run)."""
    from kernelkb.optimizer.peers import time_peers
    from kernelkb.optimizer.sandbox.evaluator import resolve_shapes, sweep_shape_set

    task = get_task(task_name)
    shapes = [s for s in resolve_shapes(task, sweep_shape_set(options.sweep_shapes, True),
                                        True)[1]
              if s not in task.edge_shapes]
    try:
        return time_peers(task, options.dtype, shapes)
    except Exception as err:  # noqa: BLE001 - the report goes out without the peers
        log.warning("timing the peers failed (%s: %s)", type(err).__name__, err)
        return None


def optimize(task_name: str, agent: Agent, *, out_dir: Path,
             knowledge: Knowledge | None = None,
             policy: PolicyConfig | None = None, options: LoopOptions | None = None,
             command: str | None = None, journal_path: Path | None = None,
             on_round: Callable[[RoundOutcome], None] | None = None,
             evaluator: Callable[..., Any] | None = None, measure_baseline: bool = True,
             run_id: str | None = None, write_back: bool = True,
             agent_factory: Callable[[], Agent] | None = None,
             resume: Resume | None = None,
             on_evaluating: Callable[[int, str, str | None], None] | None = None,
             pool: EvalPool | None = None) -> RunResult:
    """Run the loop on ``task_name`` and write report.md, plots, the exported kernel and
    (when the service is missing or down, or ``write_back`` is off: knowledge read but
    not written, as on a lent GPU host) the journal into ``out_dir/<run id>/``.

    Each regime of the task that the shapes reach is tuned in turn (``regime_plan``),
    with the budget split across them (``split_policy``) and a fresh agent per regime
    from ``agent_factory`` (else ``agent`` carries on); the exported kernel dispatches
    between the regimes' best configurations (``dispatch_table``).

    Raises AgentUnavailable (optimizer.agents.base) when the agent's endpoint fails its
    preflight: nothing is evaluated or stored then. Failing later, the run stops with
    ``StopReason.agent_unavailable`` and ``result.failure`` says why.

    ``pool`` (optimizer/eval_pool.py: several GPUs of this host, or a Ray cluster): every
    evaluation, the GPU's environment, the PyTorch baseline and the peers are measured
    there, and each round tries a candidate per slot."""
    from kernelkb.optimizer import sandbox

    task = get_task(task_name)
    agent.preflight()  # an endpoint that is down fails here, before any record
    options = options or LoopOptions()
    run_id = resume.run_id if resume is not None else run_id or new_run_id(task.name)
    run_dir = Path(out_dir) / run_id
    here = pool.call if pool is not None else (lambda function, *args: function(*args))
    env = Environment(**here(environment_here))
    journal = Journal(journal_path or run_dir / "journal.jsonl")
    writeback = Writeback(knowledge if write_back else None, journal)
    live = RunFile(run_dir, run_id, task.name)  # what the run pages read
    live.start()
    baseline = here(sandbox.measure_baseline, task.name, options.dtype,
                    sandbox.sweep_shape_set(options.sweep_shapes, True)) \
        if measure_baseline else None
    plan, untuned = regime_plan(task, options, on_gpu=env.arch != "cpu")
    if not plan:
        raise ValueError(f"{task.name}: no regime has shapes to tune here ({untuned})")
    policy = policy or PolicyConfig()
    results: dict[str, RunResult] = {}
    if resume is not None:  # done regimes stay as the journal has them (optimizer/resume.py)
        untuned.update({r: "tuned before the resume (its rounds are in this run's journal)"
                        for r in resume.done if r in plan})
        plan = {r: v for r, v in plan.items() if r not in resume.done}
        left = policy.max_iters - resume.rounds_used
        if left < 1 or not plan:
            raise ValueError(f"--resume {run_id}: nothing left to do ({resume.rounds_used} "
                             f"rounds used of --max-iters {policy.max_iters})")
        policy = replace(policy, max_iters=left)
    for n, (regime, (shapes, sweep)) in enumerate(plan.items()):
        single = len(plan) == 1 and not untuned
        sub_options = options if single else replace(options, shapes=shapes, sweep_shapes=sweep)
        shape_set = sub_options.shapes if isinstance(sub_options.shapes, str) else \
            ";".join(task.shape_label(s) for s in sub_options.shapes)
        info = RunInfo(run_id, task, options.dtype, shape_set, env, agent.name, agent.model,
                       command, regime=regime)
        share = split_policy(policy, results.values(), len(plan) - n)
        point = resume.points.get(regime) if resume is not None else None
        loop = Loop(task, (agent_factory or (lambda: agent))() if n else agent, info=info,
                    evaluator=evaluator or (pool.evaluate if pool else sandbox.evaluate),
                    writeback=writeback, pool=pool,
                    policy=Policy(share), knowledge=knowledge, options=sub_options,
                    baseline=baseline, on_round=on_round, live=live,
                    first_iteration=point.after + 1 if point else 0,
                    start_note=point.note if point else "", on_evaluating=on_evaluating)
        progress.info("regime %s (%d of %d): %d round shapes, %d sweep shapes", regime,
                      n + 1, len(plan), len(shapes), len(sweep))
        live.start(regime)
        try:
            results[regime] = loop.run(point.source if point else None)
        except BaseException:
            live.finish("failed")  # no report follows: the page stops calling it live
            raise
        stopped = results[regime].stop_reason
        if stopped in STOPPED_EARLY:
            why = ("interrupted" if stopped is StopReason.interrupt
                   else "the agent's endpoint failed")
            untuned.update({r: f"{why} before its turn" for r in list(plan)[n + 1:]})
            break
    result = combine(results, untuned)
    if options.peers and env.arch != "cpu" and result.stop_reason not in STOPPED_EARLY:
        try:
            result.peer_timings = here(_peer_timings, task.name, options)
        except KeyboardInterrupt:
            log.warning("interrupted while timing the peers: the report goes out without them")
    for sub in result.by_regime.values():
        sub.peer_timings = result.peer_timings
    table, sources = dispatch_table(task, options.dtype, env, result)
    if env.arch != "cpu":  # buckets where the measured best changes (nothing timed: none)
        from kernelkb.optimizer.learned_table import learned_table, start_entry

        table = learned_table(table, result, start_entry(result, sources))
    result.export_path = export_module(task, result.best_source,
                                       run_dir / f"best_{task.name}.py", dtype=options.dtype,
                                       note=f"Run {run_id}, {env.gpu_name}.", table=table,
                                       sources=sources)
    result.table_path = result.export_path.with_name(f"best_{task.name}.dispatch.json")
    note = "" if env.arch != "cpu" else UNTIMED_NOTE
    result.report_path = write_report(result, run_dir, title_note=note)
    result.journal_path = journal.path if writeback.journaled else None
    live.finish(stop_reason=result.stop_reason.value, sections=sections_markdown(result))
    progress.info("%s", writeback.summary())
    return result


ROUND_SWEEP_MAX = 4  # a regime's sweep shapes timed every round on a GPU, at most


def regime_plan(task: Any, options: LoopOptions, on_gpu: bool
                ) -> tuple[dict[str, tuple[list[Shape], list[Shape]]], dict[str, str]]:
    """Per regime that the sweep or the round shapes reach: (shapes timed each round,
    shapes of its final sweep); and the regimes left untuned, with why.

    On a GPU with the automatic shapes a regime's rounds time what its sweep judges it
    by: all of its sweep shapes up to ``ROUND_SWEEP_MAX`` (else the smallest, median and
    largest by bytes moved), beside its edge shapes. Why: rounds on the task-wide
    representative shapes left softmax's 1024x128256 out of the long-row rounds, so the
    regime's best was tuned for 4096x32768 and stayed at 0.29x the peers there. Given round
    shapes are used as given. On the CPU interpreter a regime's sweep shapes are its round
    shapes when they are the interpreter's own (cpu + edge), else it is left untuned (its
    sweep shapes are GPU sizes). A regime's sweep is its share of the options' sweep, else
    its round shapes."""
    from kernelkb.optimizer.sandbox.evaluator import resolve_shapes, sweep_shape_set

    rounds = task.shapes_by_regime(resolve_shapes(task, options.shapes, on_gpu)[1])
    sweep_set, sweep_shapes = resolve_shapes(
        task, sweep_shape_set(options.sweep_shapes, on_gpu), on_gpu)
    sweep = task.shapes_by_regime(sweep_shapes)
    edges = task.shapes_by_regime(task.edge_shapes)
    plan: dict[str, tuple[list[Shape], list[Shape]]] = {}
    untuned: dict[str, str] = {}
    for regime in task.regimes.names:
        mine, swept = rounds.get(regime, []), sweep.get(regime, [])
        if on_gpu and swept and (options.shapes == "auto" or not mine):
            by_size = sorted(swept, key=lambda s: task.bytes_moved(s, DTYPES[options.dtype]))
            if len(by_size) > ROUND_SWEEP_MAX:
                by_size = [by_size[0], by_size[len(by_size) // 2], by_size[-1]]
            mine = list(dict.fromkeys([*edges.get(regime, []), *by_size]))
        elif not mine and swept and sweep_set == "cpu+edge":  # the interpreter's own sizes
            mine = swept
        if options.regimes and regime not in options.regimes:
            untuned[regime] = "not asked for (--regime), or no shape of the model's in it"
        elif mine:
            plan[regime] = (mine, swept or mine)
        elif swept:
            untuned[regime] = "no shape of it small enough for the CPU interpreter"
    return plan, untuned


def split_policy(policy: PolicyConfig, done: Any, regimes_left: int) -> PolicyConfig:
    """The next regime's share: what the earlier regimes left of the rounds and the
    evaluation-seconds budget, divided by the regimes still to tune."""
    done = list(done)
    used_rounds = sum(len(r.rounds) - 1 for r in done)
    iters = max(1, math.ceil((policy.max_iters - used_rounds) / regimes_left))
    budget = policy.budget_s
    if budget is not None:
        spent = sum(r.spent_s for r in done)
        budget = max(1e-3, (budget - spent) / regimes_left)  # > 0: PolicyConfig's rule
    return replace(policy, max_iters=iters, budget_s=budget)


def combine(results: dict[str, RunResult], untuned: dict[str, str]) -> RunResult:
    """One result for the run: a single regime's as it is; several regimes' rounds and
    records together, the first regime's kernel as the module's body."""
    first = next(iter(results.values()))
    if len(results) == 1 and not untuned:
        return first
    early = [r.stop_reason for r in results.values() if r.stop_reason in STOPPED_EARLY]
    last = list(results.values())[-1]
    return RunResult(
        first.run_id, first.task, first.dtype, first.env,
        early[0] if early else last.stop_reason,
        [o for r in results.values() for o in r.rounds],
        [rec for r in results.values() for rec in r.records],
        first.start_source, first.best_source, first.best_result,
        regressions={k: v for r in results.values() for k, v in r.regressions.items()},
        retrieved_ids=list(dict.fromkeys(i for r in results.values() for i in r.retrieved_ids)),
        spent_s=sum(r.spent_s for r in results.values()), by_regime=dict(results),
        untuned=dict(untuned), failure=next((r.failure for r in results.values() if r.failure),
                                            None))


def dispatch_table(task: Any, dtype: str, env: Environment, result: RunResult
                   ) -> tuple[dict[str, Any], dict[str, str]]:
    """The run's table (this GPU, one entry per tuned regime) and the kernels the module
    must carry beside its body (a regime's best whose code, not only its header, differs).

    A regime's entry is its best kernel where that kernel passed its full sweep, else its
    starting kernel (correct by the baseline round), marked so."""
    from kernelkb.kernels.dispatch_runtime import dispatch_render
    from kernelkb.kernels.shared.hashing import source_hash
    from kernelkb.optimizer.dispatch import add_gpu, entry, new_table
    from kernelkb.optimizer.experience import task_config

    table, sources, entries = new_table(task, dtype), {}, {}
    for regime, sub in (result.by_regime or
                        {result.regime or task.regimes.names[0]: result}).items():
        sweep = sub.best_sweep
        passed = sweep is None or sweep.ok
        source = sub.best_source if passed else sub.start_source
        config = task_config(task, source)
        own = None
        try:
            if dispatch_render(result.best_source, config) != dispatch_render(source, config):
                own = source_hash(source)
        except KeyError:
            own = source_hash(source)
        if own:
            sources[own] = source
        timed = bool(sweep is not None and sweep.timing_available and passed)
        start = sub.start_sweep
        item = entry(config, shapes=list(sweep.timings) if timed and sweep else
                     list(sweep.shapes_checked if sweep else []),
                     timed=timed, time_ms=sweep.time_ms if timed and sweep else None,
                     start_ms=start.time_ms if timed and start is not None else None,
                     run_id=sub.run_id, env=env, source=own)
        if not passed:
            item["note"] = "the best kernel failed its sweep: the starting kernel is kept"
        entries[regime] = item
    add_gpu(table, env, entries)
    return table, sources


def environment_here() -> dict[str, Any]:
    """This process's GPU (or the CPU interpreter) as the record's Environment fields,
    with the peaks measured on it."""
    from kernelkb.optimizer import sandbox

    return sandbox.detect_environment(_measured_peaks())


def _measured_peaks() -> dict[str, float] | None:
    """Copy bandwidth and bf16 matmul rate measured on this GPU (~2 s), so the report's
    "share of peak" is of what the card reaches, not of its datasheet; None on a CPU."""
    import torch

    from kernelkb.optimizer import sandbox

    if not torch.cuda.is_available():
        return None
    try:
        return sandbox.measure_peaks()
    except RuntimeError as err:  # out of memory on a crowded card: the datasheet stands
        log.warning("peaks not measured (%s): share of peak uses the datasheet", err)
        return None
