"""End to end on the CPU interpreter: the offline agent on two related tasks, with a real
LocalKnowledge, so that run 2 retrieves and uses what run 1 wrote; plus the stop
conditions that are cheap to prove with real evaluations (max-iters, patience, budget).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelkb.optimizer.agents.base import AgentContext
from kernelkb.optimizer.agents.offline import OfflineAgent
from kernelkb.optimizer.loop import LoopOptions
from kernelkb.optimizer.policy import PolicyConfig, StopReason
from kernelkb.optimizer.session import optimize

pytestmark = pytest.mark.slow


def options(shapes: list[tuple[int, ...]], retrieval: bool = True) -> LoopOptions:
    return LoopOptions(shapes=shapes, sweep_shapes=shapes, seeds=1, timeout_s=120,
                       retrieval=retrieval)


def test_run_two_retrieves_and_uses_run_one(tmp_path: Path, knowledge) -> None:
    first = optimize("softmax", OfflineAgent(epsilon=0.0), out_dir=tmp_path,
                     knowledge=knowledge, policy=PolicyConfig(max_iters=2),
                     options=options([(4, 128)]), command="test run 1")
    assert first.stop_reason is StopReason.max_iters
    assert [r.verdict for r in first.rounds] == ["neutral"] * 3  # untimed, verified
    assert knowledge.stats()["experiences"] == len(first.records) == 3
    first_ids = {r.id for r in first.records}
    assert first.records[1].edit.diff and first.records[1].provenance.command == "test run 1"

    agent = OfflineAgent(epsilon=0.0)
    second = optimize("rmsnorm", agent, out_dir=tmp_path, knowledge=knowledge,
                      policy=PolicyConfig(patience=1), options=options([(2, 256)]))
    assert second.stop_reason is StopReason.patience  # one untimed round = no improvement
    assert len(second.rounds) == 2
    assert first_ids & set(second.retrieved_ids), "run 2 did not retrieve run 1"
    used = second.rounds[1]
    # without evidence the catalog's first edit (PERSISTENT) would come first; run 1's
    # verified BLOCK_SIZE=1024 on softmax (a related op) moved that edit up, and it is cited
    blank = agent.rank(AgentContext(task=second.task, dtype="float16", iteration=1,
                                    round_kind="exploit", best_source=second.start_source))
    assert blank[0][0].param == "PERSISTENT"
    assert used.summary.startswith("set BLOCK_SIZE 0 -> 1024")
    assert any(i[:10] in used.rationale for i in first_ids)
    stored = second.records[1].edit  # the reasons go to their own field, not the summary
    assert stored.summary == used.summary and ": " in stored.summary  # says what it does
    assert stored.rationale == used.rationale and "[" not in stored.summary
    assert (second.report_path.parent / "best_so_far.png").stat().st_size > 0
    report = second.report_path.read_text()
    assert "stopped by **patience**" in report
    assert used.rationale[:60].replace("|", "/") in report  # the rounds table says why
    # the run file the pages read: what stopped it and the sweep, as fields, not prose
    run_file = json.loads((second.report_path.parent / "run.json").read_text())
    assert run_file["state"] == "finished" and run_file["stop_reason"] == "patience"
    assert run_file["run_id"] == second.run_id and run_file["candidate"] is None
    assert run_file["sections"].startswith("## Shape sweep of the best kernel vs the start")
    assert "![" not in run_file["sections"] and "## Rounds" not in run_file["sections"]


def test_budget_stops_the_run(tmp_path: Path) -> None:
    result = optimize("softmax", OfflineAgent(), out_dir=tmp_path, knowledge=None,
                      policy=PolicyConfig(budget_s=0.5), options=options([(4, 128)]))
    assert result.stop_reason is StopReason.budget
    assert len(result.rounds) == 1  # the baseline alone spent the budget
    assert result.journal_path is not None  # no store: everything went to the journal
    assert len(result.journal_path.read_text().splitlines()) == len(result.records)


class _InterruptedAgent(OfflineAgent):
    """Stands for Ctrl-C or a SIGTERM from a time limit arriving in round 2."""

    def propose(self, context: AgentContext):
        if context.iteration == 2:
            raise KeyboardInterrupt("signal 15")
        return super().propose(context)


def test_an_interrupted_run_keeps_its_rounds_and_writes_its_report(tmp_path: Path) -> None:
    result = optimize("softmax", _InterruptedAgent(epsilon=0.0), out_dir=tmp_path,
                      knowledge=None, policy=PolicyConfig(max_iters=5),
                      options=options([(4, 128)]))
    assert result.stop_reason is StopReason.interrupt
    assert len(result.rounds) == 2 and result.best_sweep is None  # baseline + round 1
    assert len(result.journal_path.read_text().splitlines()) == 2
    assert "stopped by **interrupt**" in result.report_path.read_text()
    assert json.loads((result.report_path.parent / "run.json").read_text())[
        "stop_reason"] == "interrupt"
    assert result.export_path.exists()


def test_sigterm_stops_a_run_as_ctrl_c_does() -> None:
    import os
    import signal
    import time

    from kernelkb.cli.optimize import interrupt_on_sigterm

    previous = signal.getsignal(signal.SIGTERM)
    try:
        interrupt_on_sigterm()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(2)  # the handler raises at the next bytecode, well before this ends
        from kernelkb.cli.optimize import SIGNALLED

        assert SIGNALLED["signum"] == signal.SIGTERM  # the command then exits 143
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_run_stopped_by_sigterm_is_written_up_and_exits_143(tmp_path) -> None:
    """`kernelkb optimize` under a time limit: the rounds done are reported, and the
    exit status says the run did not finish (it was 0, as for a finished run)."""
    import os
    import signal
    import subprocess
    import sys

    env = {**os.environ, "KERNELKB_HOME": str(tmp_path / "home"), "KERNELKB_VECTORS": "false",
           "KERNELKB_LOAD_SEEDS_ON_START": "false"}
    proc = subprocess.Popen([sys.executable, "-m", "kernelkb", "optimize", "softmax",
                             "--no-retrieval", "--shapes", "cpu", "--sweep-shapes", "cpu",
                             "--max-iters", "50", "--patience", "50",
                             "--out", str(tmp_path / "runs")], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:  # the signal arrives once round 1 is written
        lines.append(line)
        if "round   1 " in line:
            proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=300)
    out = "".join(lines)
    assert proc.returncode == 128 + signal.SIGTERM, out[-2000:]
    assert list((tmp_path / "runs").glob("*/report.md")), out[-2000:]
