"""Item 4: the learned ranker where users meet it. bootstrap / POST /bootstrap rank an op's
configurations for a GPU named by name (or by facts), with predicted relative time and
evidence; the offline agent's adoption, the tuner and the LLM prompt take that order when
the GPU has measured nothing of the task. Real SQLite stores, the shipped seeds."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest

from kernelkb.cli import main as cli
from kernelkb.kb.record import Environment
from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.agents.base import AgentContext
from kernelkb.optimizer.agents.llm import build_messages
from kernelkb.optimizer.agents.offline import OfflineAgent
from kernelkb.optimizer.agents.tuner import TunerAgent
from kernelkb.optimizer.recall import known
from kernelkb.optimizer.spaces import task_space
from kernelkb.retrieval.prediction import UnknownGpu
from kernelkb.service import LocalKnowledge

SOFTMAX = get_task("softmax")


def test_a_gpu_named_by_name_gets_a_ranked_space_with_evidence(seeded: LocalKnowledge) -> None:
    # 10: the model may rank configurations nobody measured first (the long-row path on
    # the seeds' long-row shapes); the measured ones further down cite their GPU
    plan = seeded.bootstrap({"gpu_name": "NVIDIA A100"}, op_type="softmax",
                            space=task_space(SOFTMAX), limit=10)
    assert plan.target["arch"] == "sm_80" and plan.target["sm_count"] == 108  # from the table
    pred = plan.prediction
    assert pred is not None and pred.task_id == "softmax"
    assert pred.candidates == len(list(SOFTMAX.space())) and pred.target_measurements == 0
    assert pred.trained_on == {"NVIDIA H200": pred.trained_on["NVIDIA H200"]}
    assert "a hint, not a measurement" in pred.note
    assert [i.rank for i in pred.items] == list(range(1, 11))
    times = [i.predicted_rel_time for i in pred.items]
    assert all(t is not None and t > 0 for t in times) and times == sorted(times)
    for item in pred.items:
        assert SOFTMAX.constraint(item.config) is None and set(item.config) == set(
            SOFTMAX.default_config)
        # a configuration the seeds measured cites the H200; one they did not (a variant
        # added since) says that it is predicted from features alone
        assert item.evidence and (all("NVIDIA H200" in line for line in item.evidence)
                                  or item.evidence[0].startswith("not measured on any GPU"))
        assert {n.shape for n in item.neighbours} <= set(pred.shapes)
    assert any("NVIDIA H200" in item.evidence[0] for item in pred.items)


def test_unknown_name_is_an_error_and_explicit_facts_still_work(seeded: LocalKnowledge) -> None:
    with pytest.raises(UnknownGpu, match="closest: 'NVIDIA A100-SXM4-80GB'") as err:
        seeded.bootstrap({"gpu_name": "NVIDIA A1000-SXM4-80GB"}, op_type="softmax")
    assert "NVIDIA H200" in str(err.value) and "AMD Instinct MI300X" in str(err.value)
    facts = {"gpu_name": "a card no table knows", "arch": "sm_89", "sm_count": 80,
             "mem_bandwidth_gbps": 900.0, "smem_per_sm_kib": 100}
    plan = seeded.bootstrap(facts, op_type="softmax", space=task_space(SOFTMAX), limit=3)
    assert plan.target["gpu_name"] == "a card no table knows"
    assert plan.prediction is not None and len(plan.prediction.items) == 3


def _kt_record(gpu: str, facts: dict[str, Any], block: int, tile: int, size: int,
               speed: float) -> dict[str, Any]:
    """An imported-looking record: CUDA data (triton 'none'), problem size in the label.
    The time follows one rule on every GPU (256 x 2 is best), scaled by the GPU."""
    time_ms = speed * (1 + abs(math.log2(block / 256)) * 0.3 + abs(math.log2(tile / 2)) * 0.2)
    time_ms *= size / 4096
    shape = f"problem_size={size}x{size}"
    return {
        "run_id": f"import-{gpu}", "iteration": block * 10 + tile,
        "task": {"op_type": "stencil", "task_id": "stencil", "dtype": "float32",
                 "shape_set": shape},
        "env": {"gpu_name": gpu, **facts, "triton_version": "none", "torch_version": "none"},
        "edit": {"summary": f"block_size_x={block}, tile_size_x={tile}", "categories": ["tiling"],
                 "config": {"block_size_x": block, "tile_size_x": tile},
                 "child_hash": f"kt-{gpu}-{block}-{tile}-{size}"},
        "feedback": {"stage": "performance", "timing_available": True, "time_ms": time_ms,
                     "timings": [{"shape": shape, "median_ms": time_ms}], "text": "imported"},
        "verdict": "neutral",
        "provenance": {"agent": "import", "source": "tests (fabricated Kernel Tuner data)"},
    }


@pytest.fixture
def backend() -> dict[str, Any]:
    """``knowledge`` (tests/conftest.py) without vectors: the rankings read SQL."""
    return {"vectors": False}


def test_an_imported_op_ranks_the_configurations_seen_in_the_store(
        knowledge: LocalKnowledge) -> None:
    kb = knowledge  # empty: the ranker trains on these records alone
    gpus = {"NVIDIA A100-PCIE-40GB": ({"arch": "sm_80", "sm_count": 108}, 1.0),
            "NVIDIA RTX A6000": ({"arch": "sm_86", "sm_count": 84}, 1.6)}
    records = [_kt_record(gpu, facts, block, tile, size, speed)
               for gpu, (facts, speed) in gpus.items()
               for block, tile, size in itertools.product((16, 32, 64, 128, 256, 512, 1024),
                                                          (1, 2, 4), (2048, 4096))]
    assert not kb.ingest(records).rejected
    plan = kb.bootstrap({"gpu_name": "NVIDIA A4000"}, op_type="stencil", limit=5)
    pred = plan.prediction
    assert pred is not None and pred.task_id is None and pred.candidates == 21
    assert set(pred.trained_on) == set(gpus)
    # both GPUs agree that 256 x 2 is fastest: the model puts it in its first three
    assert {"block_size_x": 256, "tile_size_x": 2} in [i.config for i in pred.items[:3]]
    assert {n.gpu for n in pred.items[0].neighbours} == set(gpus)
    # each evidence line: the most alike measured GPU on a shape (the A6000 is an sm_86
    # like the A4000)
    assert all("NVIDIA RTX A6000" in line for line in pred.items[0].evidence)
    # kept until the store changes: the same ranking object, then a new one
    again = kb.bootstrap({"gpu_name": "NVIDIA A4000"}, op_type="stencil", limit=5).prediction
    assert again is pred
    kb.ingest([_kt_record("NVIDIA RTX A4000", {"arch": "sm_86"}, 256, 2, 4096, 1.2)])
    measured = kb.bootstrap({"gpu_name": "NVIDIA A4000"}, op_type="stencil",
                            limit=5).prediction
    assert measured is not pred and measured.target_measurements == 1
    assert measured.items[0].config == {"block_size_x": 256, "tile_size_x": 2} or any(
        i.measured_rel_time is not None for i in measured.items)
    no_op = kb.bootstrap({"gpu_name": "NVIDIA A4000"}, op_type="no_such_op")
    assert no_op.prediction is None and "no measurement of no_such_op" in no_op.prediction_note
    kb.close()


def test_a_part_the_table_lacks_takes_its_architectures_facts(seeded: LocalKnowledge) -> None:
    """Nothing is refused for a missing fact: a card named by its product line gets the
    facts its architecture fixes, the plan says which it lacks and how far the nearest
    measured GPU is; facts given on top are used and named."""
    plan = seeded.bootstrap({"gpu_name": "NVIDIA GeForce RTX 4070 Ti SUPER"},
                            op_type="softmax", space=task_space(SOFTMAX), limit=3)
    assert (plan.target["arch"], plan.target["smem_per_sm_kib"]) == ("sm_89", 100)
    assert "sm_count" not in plan.target and plan.prediction is not None
    lacking, far = plan.warnings
    assert "its architecture (Ada, sm_89)" in lacking and "unknown: sm_count" in lacking
    assert far.startswith("the nearest measured GPU, NVIDIA H200, is far") \
        and "arch sm_89 vs sm_90" in far and "SMs unknown vs 132" in far
    given = seeded.bootstrap({"gpu_name": "NVIDIA GeForce RTX 4070 Ti SUPER",
                              "sm_count": 66}, op_type="softmax")
    assert given.target["sm_count"] == 66 and "given: sm_count" in given.warnings[0] \
        and "sm_count" not in given.target["unknown_facts"]
    near = seeded.bootstrap({"gpu_name": "NVIDIA H200"}, op_type="softmax", include_own=True)
    assert near.warnings == []  # a known part, measured: nothing to warn of


def test_bootstrap_ranks_for_the_shapes_asked(seeded: LocalKnowledge) -> None:
    """With shapes, the ranker predicts over them, not over the op's most measured
    shapes: one decode row and many short rows get different first configurations."""
    def first(shape: str):
        plan = seeded.bootstrap({"gpu_name": "NVIDIA L40S"}, op_type="softmax",
                                space=task_space(SOFTMAX), limit=3, shapes=[shape])
        assert plan.prediction is not None and plan.prediction.shapes == [shape]
        return plan.prediction.items[0].config

    assert first("rows=1,cols=32000") != first("rows=32768,cols=1024")


def test_cli_bootstrap_by_name(seeded: LocalKnowledge, monkeypatch, capsys) -> None:
    monkeypatch.setenv("KERNELKB_DATA_DIR", str(seeded.settings.data_dir))
    monkeypatch.setenv("KERNELKB_VECTORS", "false")
    assert cli.main(["bootstrap", "--gpu", "NVIDIA L40S", "--op", "rmsnorm", "--limit",
                     "3"]) == 0
    out = capsys.readouterr().out
    assert "ranked configurations of rmsnorm on NVIDIA L40S" in out and "  3. predicted" in out
    assert cli.main(["bootstrap", "--gpu", "Voodoo 5", "--op", "rmsnorm"]) == 2
    assert "unknown GPU 'Voodoo 5'" in capsys.readouterr().err


def _env(gpu: str, arch: str) -> Environment:
    return Environment(gpu_name=gpu, arch=arch, triton_version="3.6.0", torch_version="2.11")


def _context(task: Any, **kwargs: Any) -> AgentContext:
    return AgentContext(task=task, dtype="float16", iteration=1, round_kind="exploit",
                        best_source=task.template, gpu_arch="sm_80", **kwargs)


def test_agents_take_the_rankers_order_where_the_gpu_measured_nothing(
        seeded: LocalKnowledge) -> None:
    new = known(seeded, SOFTMAX, "float16", _env("NVIDIA A100-SXM4-80GB", "sm_80"))
    assert new.predicted and 1 <= len(new.configs) <= 3
    assert all(i.kind == "predicted" and "a hint" in i.evidence for i in new.configs)
    assert [i.config for i in new.configs] == [p.config for p in new.predicted[:len(new.configs)]]
    context = _context(SOFTMAX, known_configs=new.configs, predicted=new.predicted)
    # the offline agent adopts the ranker's first configuration that is not the current one
    first = next(p.config for p in new.predicted if p.config != SOFTMAX.default_config)
    adopted = OfflineAgent(epsilon=0.0).adoption(context)
    assert adopted is not None and adopted.summary.startswith("adopt a predicted best")
    assert "ranker's order" in adopted.rationale and SOFTMAX.render(first) == adopted.source
    # the tuner walks the ranked points of its structure in the ranker's order
    structure = {v.name: SOFTMAX.default_config[v.name] for v in SOFTMAX.variants}
    wanted = next(p.config for p in new.predicted if all(
        p.config[k] == v for k, v in structure.items()))
    proposal = TunerAgent(search="grid").propose(context)
    assert proposal.source == SOFTMAX.render(wanted) and "predicted order" in proposal.rationale
    tpe = TunerAgent(search="tpe").propose(context)
    assert tpe.source == SOFTMAX.render(wanted)
    # the LLM sees the order as a hint, not a fact
    prompt = build_messages(context)[1]["content"]
    assert "Predicted ranking (a hint, not a fact)" in prompt
    assert "1. " + ", ".join(f"{k}={v!r}" for k, v in sorted(new.predicted[0].config.items())) \
        in prompt
    # on the H200, where the seeds measured softmax, the measured configurations stand
    h200 = known(seeded, SOFTMAX, "float16", _env("NVIDIA H200", "sm_90"))
    assert h200.predicted == [] and h200.configs and all(i.kind == "config"
                                                         for i in h200.configs)
    assert "Predicted ranking" in build_messages(_context(SOFTMAX))[1]["content"]  # (none)
