"""One optimization run end to end: set up, loop, sweep, report, export.

The programmatic entry point (the CLI and the tests call it): it builds the run's shared
record fields, the write-back with its journal, the policy and the loop, then writes the
report and exports the best kernel into the run folder.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kb.record import Environment
from kernels.base import get_task
from optimizer.agents.base import Agent
from optimizer.experience import RunInfo
from optimizer.export import export_module
from optimizer.loop import Loop, LoopOptions, RoundOutcome, RunResult
from optimizer.policy import Policy, PolicyConfig, StopReason
from optimizer.report import write_report
from optimizer.writeback import Journal, Writeback

log = logging.getLogger(__name__)
UNTIMED_NOTE = ("**Nothing in this report was timed.** There is no GPU here: every kernel ran "
                "in Triton's CPU interpreter, which checks correctness only. Times, speedups, "
                "verdicts on speed and the peers need a GPU.")


def new_run_id(task_name: str) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{task_name}-{stamp}-{secrets.token_hex(3)}"


def _peer_timings(task: Any, options: LoopOptions) -> Any:
    """The peers over the sweep shapes, checked then timed in this run (PeerTimes, or None:
    a failure costs the table, not the run)."""
    from optimizer.peers import time_peers
    from optimizer.sandbox.evaluator import resolve_shapes, sweep_shape_set

    shapes = [s for s in resolve_shapes(task, sweep_shape_set(options.sweep_shapes, True),
                                        True)[1]
              if s not in task.edge_shapes]
    try:
        return time_peers(task, options.dtype, shapes)
    except Exception as err:  # noqa: BLE001 - the report goes out without the peers
        log.warning("timing the peers failed (%s: %s)", type(err).__name__, err)
        return None


def optimize(task_name: str, agent: Agent, *, out_dir: Path, knowledge: Any = None,
             policy: PolicyConfig | None = None, options: LoopOptions | None = None,
             command: str | None = None, journal_path: Path | None = None,
             on_round: Callable[[RoundOutcome], None] | None = None,
             evaluator: Callable[..., Any] | None = None, measure_baseline: bool = True,
             run_id: str | None = None, write_back: bool = True) -> RunResult:
    """Run the loop on ``task_name`` and write report.md, plots, the exported kernel and
    (when the service is missing or down, or ``write_back`` is off: knowledge read but
    not written, as on a lent GPU host) the journal into ``out_dir/<run id>/``.

    Raises AgentUnavailable (optimizer.agents.base) when the agent's endpoint fails its
    preflight: nothing is evaluated or stored then. Failing later, the run stops with
    ``StopReason.agent_unavailable`` and ``result.failure`` says why."""
    from optimizer import sandbox

    task = get_task(task_name)
    preflight = getattr(agent, "preflight", None)
    if preflight is not None:  # an endpoint that is down fails here, before any record
        preflight()
    options = options or LoopOptions()
    run_id = run_id or new_run_id(task.name)
    run_dir = Path(out_dir) / run_id
    env = Environment(**sandbox.detect_environment(_measured_peaks()))
    shape_set = options.shapes if isinstance(options.shapes, str) else \
        ";".join(task.shape_label(s) for s in options.shapes)
    info = RunInfo(run_id, task, options.dtype, shape_set, env, agent.name, agent.model,
                   command)
    journal = Journal(journal_path or run_dir / "journal.jsonl")
    writeback = Writeback(knowledge if write_back else None, journal)
    baseline = sandbox.measure_baseline(
        task.name, options.dtype, sandbox.sweep_shape_set(options.sweep_shapes, True)) \
        if measure_baseline else None
    loop = Loop(task, agent, info=info, evaluator=evaluator or sandbox.evaluate,
                writeback=writeback, policy=Policy(policy or PolicyConfig()),
                knowledge=knowledge, options=options, baseline=baseline, on_round=on_round)
    result = loop.run()
    stopped_early = result.stop_reason in (StopReason.interrupt, StopReason.agent_unavailable)
    if options.peers and env.arch != "cpu" and not stopped_early:
        try:
            result.peer_timings = _peer_timings(task, options)
        except KeyboardInterrupt:
            log.warning("interrupted while timing the peers: the report goes out without them")
    note = "" if env.arch != "cpu" else UNTIMED_NOTE
    result.report_path = write_report(result, run_dir, title_note=note)
    result.export_path = export_module(task, result.best_source,
                                       run_dir / f"best_{task.name}.py", dtype=options.dtype,
                                       note=f"Run {run_id}, {env.gpu_name}.")
    result.journal_path = journal.path if writeback.journaled else None
    log.info("%s; report: %s", writeback.summary(), result.report_path)
    return result


def _measured_peaks() -> dict[str, float] | None:
    """Copy bandwidth and bf16 matmul rate measured on this GPU (~2 s), so the report's
    "share of peak" is of what the card reaches, not of its datasheet; None on a CPU."""
    import torch

    from optimizer import sandbox

    if not torch.cuda.is_available():
        return None
    try:
        return sandbox.measure_peaks()
    except RuntimeError as err:  # out of memory on a crowded card: the datasheet stands
        log.warning("peaks not measured (%s): share of peak uses the datasheet", err)
        return None
