"""``optimize --resume RUN``: the run's own records are its checkpoint. A regime that a
later one followed is done; the one it stopped in goes on from its best kernel, numbered
after its last round, with the rounds used taken off --max-iters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kb_testdata import record_dict  # noqa: E402

from kernelkb.kb.record import ExperienceRecord  # noqa: E402
from kernelkb.optimizer.resume import CannotResume, plan_resume, resume_from  # noqa: E402


def _record(regime: str, iteration: int, kind: str, verdict: str, source: str) -> ExperienceRecord:
    rec = record_dict(run="softmax-run", iteration=iteration, summary=f"{regime} {iteration}")
    rec["task"]["regime"] = regime
    rec["provenance"]["round_kind"] = kind
    rec["verdict"] = verdict
    rec["edit"]["child_source"] = source
    rec["created_at"] = f"2026-12-04T10:{len(regime):02d}:{iteration:02d}Z"
    return ExperienceRecord.model_validate(rec)


def _run(tmp_path: Path, state: dict) -> Path:
    folder = tmp_path / "softmax-run"
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({"task": "softmax", **state}))
    records = [_record("short_rows", 0, "baseline", "neutral", "S0"),
               _record("short_rows", 1, "exploit", "improved", "S1"),
               _record("medium_rows", 0, "baseline", "neutral", "M0"),
               _record("medium_rows", 1, "exploit", "improved", "M1"),
               _record("medium_rows", 2, "explore", "regressed", "M2")]
    (folder / "journal.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in records)
                                          + '{"cut by the cra')
    return folder


def test_the_regime_it_stopped_in_goes_on_from_its_best_kernel(tmp_path: Path) -> None:
    _run(tmp_path, {"state": "running"})
    plan = resume_from(tmp_path, "softmax-run")
    assert plan.task == "softmax" and plan.done == ["short_rows"]
    point = plan.points["medium_rows"]
    assert point.source == "M1" and point.after == 2 and point.rounds == 2
    assert plan.rounds_used == 3 and "round 1" in point.note


def test_a_finished_run_is_not_resumed_an_interrupted_one_is(tmp_path: Path) -> None:
    folder = _run(tmp_path, {"state": "finished", "stop_reason": "max_iters"})
    with pytest.raises(CannotResume, match="finished"):
        resume_from(tmp_path, "softmax-run")
    (folder / "run.json").write_text(json.dumps({"state": "finished",
                                                 "stop_reason": "interrupt"}))
    assert resume_from(tmp_path, str(folder)).points
    with pytest.raises(CannotResume, match="no run folder"):
        plan_resume(tmp_path / "nope", [])


def test_the_cli_refuses_a_run_of_another_task(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    from kernelkb.cli.main import main

    _run(tmp_path, {"state": "running"})
    monkeypatch.setenv("KERNELKB_HOME", str(tmp_path / "home"))
    assert main(["optimize", "rmsnorm", "--resume", str(tmp_path / "softmax-run")]) == 2
    assert "that run optimized softmax, not rmsnorm" in capsys.readouterr().err


@pytest.mark.slow
def test_an_interrupted_run_resumes_where_it_stopped(tmp_path: Path) -> None:
    """A real run on the CPU interpreter, stopped (as Ctrl-C does) in its second regime,
    then resumed: the first regime is not tuned again, the second goes on numbered after
    its rounds, in the same run folder and journal."""
    from kernelkb.optimizer.agents.offline import OfflineAgent
    from kernelkb.optimizer.loop import LoopOptions
    from kernelkb.optimizer.policy import PolicyConfig, StopReason
    from kernelkb.optimizer.session import optimize

    class StopsInSecondRegime(OfflineAgent):
        calls = 0

        def propose(self, context):  # type: ignore[no-untyped-def]
            StopsInSecondRegime.calls += 1
            if StopsInSecondRegime.calls == 3:  # the first proposal of the second regime
                raise KeyboardInterrupt
            return super().propose(context)

    shapes = [(1, 2100), (1, 16500)]  # medium_rows, long_rows
    options = LoopOptions(shapes=shapes, sweep_shapes=shapes, seeds=1, timeout_s=120,
                          retrieval=False)
    first = optimize("softmax", StopsInSecondRegime(epsilon=0.0), out_dir=tmp_path,
                     policy=PolicyConfig(max_iters=4), options=options,
                     agent_factory=lambda: StopsInSecondRegime(epsilon=0.0))
    assert first.stop_reason is StopReason.interrupt
    plan = resume_from(tmp_path, first.run_id)
    assert plan.done == ["medium_rows"] and plan.rounds_used == 2
    again = optimize("softmax", OfflineAgent(epsilon=0.0), out_dir=tmp_path,
                     policy=PolicyConfig(max_iters=4), options=options, resume=plan)
    assert again.run_id == first.run_id and list(again.by_regime or {"long_rows": 0}) == \
        ["long_rows"]
    assert "before the resume" in again.untuned["medium_rows"]
    numbers = [o.iteration for o in again.rounds]
    assert numbers[0] == plan.points["long_rows"].after + 1 and len(numbers) == 3
    journal = (tmp_path / first.run_id / "journal.jsonl").read_text().splitlines()
    assert len(journal) == len(first.records) + len(again.records)
