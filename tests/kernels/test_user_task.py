"""A user's task in a folder outside the package, through the real machinery: the
sandboxed checks in the Triton interpreter (``kernelkb tasks --check``), an entry-point
task evaluated in the sandbox, and a short CPU optimize run whose first prompt carries
rmsnorm's experiences from the shipped seeds, labelled as a related op.

The sandbox runs each evaluation in a fresh, jailed subprocess that sees neither /tmp
nor the user's folder: these tests prove the task travels there (runner.place_task).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from user_task_sample import isolated_registry, write_task

from kernelkb.cli import main as cli
from kernelkb.kernels import discovery
from kernelkb.kernels.discovery import get_task

if TYPE_CHECKING:
    from kernelkb.service import LocalKnowledge

SEEDS = Path(__file__).resolve().parents[2] / "seeds"


@pytest.fixture(autouse=True)
def _registry():
    with isolated_registry():
        yield


def test_the_checks_of_a_user_task_pass_in_the_sandbox(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "my_tasks"
    write_task(folder)
    status = cli.main(["tasks", "--tasks-dir", str(folder), "--check", "add_rmsnorm",
                       "--dtype", "float32"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "ok   declaration: 2 knobs, 0 variants, related ops ['rmsnorm']" in out
    assert "ok   search space: 8 legal points render (under the 30-90" in out
    assert "ok   naive kernel, float32: 3 shapes (cpu+edge) pass" in out


@pytest.mark.slow
def test_the_checks_catch_a_wrong_user_kernel(tmp_path: Path, capsys) -> None:
    """The sandbox really compares the user's kernel with the user's reference: a template
    that forgets the residual fails, and the one-file form (template inline) is read."""
    write_task(tmp_path, one_file=True, replace={
        "            h += tl.load(r_ptr": "            h += 0.0 * tl.load(r_ptr"})
    status = cli.main(["tasks", "--tasks-dir", str(tmp_path), "--check", "add_rmsnorm",
                       "--dtype", "float32"])
    out = capsys.readouterr().out
    assert status == 1
    assert "FAIL naive kernel, float32: correctness: wrong_result" in out


@pytest.mark.slow
def test_an_entry_point_task_is_evaluated_in_the_sandbox(tmp_path: Path, monkeypatch) -> None:
    from kernelkb.optimizer.sandbox import evaluate

    site = tmp_path / "site"
    write_task(site / "kkb_demo_tasks", name="add_rmsnorm_ep")
    (site / "kkb_demo_tasks" / "__init__.py").write_text(
        "from kkb_demo_tasks.add_rmsnorm_ep import TASK\n")
    info = site / "kkb_demo_tasks-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kkb-demo-tasks\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[kernelkb.tasks]\ndemo = kkb_demo_tasks\n")
    monkeypatch.syspath_prepend(str(site))
    task = get_task("add_rmsnorm_ep")
    result = evaluate(task.name, task.render({"NUM_WARPS": 2}), dtype="float32",
                      shapes="cpu", seeds=1, timeout_s=300)
    assert result.ok, (result.error_kind, result.error_message, result.artifacts["stderr_tail"])
    assert result.shapes_checked == ["rows=8,hidden=512"]


@pytest.fixture
def backend() -> dict[str, Any]:
    """``knowledge`` (tests/conftest.py) with the shipped seeds to load: rmsnorm's
    experiences are what the user's task is shown as a related op's."""
    return {"seeds_dir": SEEDS}


@pytest.mark.slow
def test_a_user_task_runs_through_optimize_on_cpu_with_its_related_ops_experiences(
        tmp_path: Path, knowledge: LocalKnowledge) -> None:
    from kernelkb.optimizer.agents.base import AgentContext
    from kernelkb.optimizer.agents.llm import build_messages
    from kernelkb.optimizer.agents.offline import OfflineAgent
    from kernelkb.optimizer.loop import LoopOptions
    from kernelkb.optimizer.policy import PolicyConfig
    from kernelkb.optimizer.session import optimize

    class PromptKeeper(OfflineAgent):
        """The offline agent, keeping the prompt an LLM agent would have been sent."""

        prompts: list[str] = []

        def propose(self, context: AgentContext):
            self.prompts.append(build_messages(context)[1]["content"])
            return super().propose(context)

    write_task(tmp_path / "outside", one_file=True)
    discovery.add_tasks_dirs([tmp_path / "outside"])
    assert knowledge.seed_if_empty()
    agent = PromptKeeper(epsilon=0.0)
    result = optimize("add_rmsnorm", agent, out_dir=tmp_path / "runs", knowledge=knowledge,
                      policy=PolicyConfig(max_iters=1),
                      options=LoopOptions(dtype="float32", shapes="cpu", sweep_shapes="cpu",
                                          seeds=1, timeout_s=300))
    assert [r.verdict for r in result.rounds] == ["neutral", "neutral"]  # untimed, verified
    assert {r.task.task_id for r in result.records} == {"add_rmsnorm"}
    first = agent.prompts[0]
    assert "(related op rmsnorm, not this task's) rmsnorm/rmsnorm float16 on NVIDIA H200" \
        in first, first
    assert "Residual add then RMSNorm" in first  # the task's own description
    knowledge.close()
