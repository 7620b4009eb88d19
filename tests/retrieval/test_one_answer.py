"""What ``bootstrap`` and ``query`` print reads one way: one similarity per pair of GPUs,
one "try first" answer, time ratios said as extra time (never "1.20x the best" for a
configuration predicted slower), hits that carry their id and shape, and a neutral hit
kept out of "what worked". The shipped seeds in a real SQLite store, through the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from kernelkb.cli import main as cli
from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.spaces import task_space
from kernelkb.retrieval.first_try import time_vs_best
from kernelkb.service import LocalKnowledge

SEEDS = Path(__file__).resolve().parents[2] / "seeds"
SOFTMAX = get_task("softmax")
RMSNORM = get_task("rmsnorm")  # the seeds hold its best measured configurations
H100 = "NVIDIA H100 SXM"


@pytest.fixture
def cli_store(seeded: LocalKnowledge, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELKB_DATA_DIR", str(seeded.settings.data_dir))
    monkeypatch.setenv("KERNELKB_VECTORS", "false")
    monkeypatch.setenv("KERNELKB_SEEDS_DIR", str(SEEDS))


def test_one_similarity_per_pair_of_gpus(seeded: LocalKnowledge) -> None:
    plan = seeded.bootstrap({"gpu_name": H100}, op_type="softmax", space=task_space(SOFTMAX))
    assert plan.prediction is not None
    plan_figure = {m.gpu_name: round(m.similarity, 2) for m in plan.similar_hardware}
    ranker_figures = {(n.gpu, round(n.similarity, 2)) for item in plan.prediction.items
                      for n in item.neighbours}
    assert ranker_figures and all(plan_figure[gpu] == s for gpu, s in ranker_figures)


def test_the_cli_gives_one_try_first_and_says_time_as_time(
        cli_store: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bootstrap", "--op", "rmsnorm", "--gpu", H100]) == 0
    out = capsys.readouterr().out
    assert out.count("try first:") == 1
    first = out.split("try first: ", 1)[1].splitlines()[0]
    ranked_first = re.search(r"^\s+1\. predicted .* \| (.*)$", out, re.M)
    assert ranked_first and ranked_first.group(1) == first  # the ranker's #1, said once
    assert "the learned ranker's #1 for rmsnorm" in out
    assert not re.search(r"\d\.\d\dx (the|its) best", out)  # no ratio that reads as speed
    assert re.search(r"predicted \+\d+% time vs the best per shape", out)
    similarities = set(re.findall(r"NVIDIA H200 \(sm_90\)? ?\(?similarity (\d\.\d\d)", out)
                       + re.findall(r"on NVIDIA H200 \(similarity (\d\.\d\d)\)", out)
                       + re.findall(r"similar: NVIDIA H200 \(sm_90\) similarity (\d\.\d\d)", out))
    assert len(similarities) == 1, similarities
    measured = [line for line in out.splitlines() if "[config]" in line and "rmsnorm" in line]
    assert measured and all("the ranker's #" in line or "not in the ranker's first" in line
                            for line in measured)


@pytest.fixture
def backend() -> dict[str, Any]:
    """``knowledge`` (tests/conftest.py) without vectors: bootstrap reads SQL."""
    return {"vectors": False}


def test_a_gpu_with_its_own_measurements_tries_its_best_measured_first(
        knowledge: LocalKnowledge) -> None:
    """The optimizer's rule (recall.known): the ranker leads only where the target has
    measured nothing of the op. Here an H100 holds a share of the seeds' rmsnorm space."""
    lines = (SEEDS / "sweep_rmsnorm_float16.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    moved = []
    for record in records[::3]:
        record = {**record, "env": {**record["env"], "gpu_name": "NVIDIA H100 80GB HBM3",
                                    "mem_bandwidth_gbps": 3350.0, "smem_per_sm_kib": 228}}
        record.pop("id")
        moved.append(record)
    kb = knowledge
    assert not kb.ingest(records + moved).rejected
    plan = kb.bootstrap({"gpu_name": "NVIDIA H100 80GB HBM3"}, op_type="rmsnorm",
                        space=task_space(RMSNORM), include_own=True)
    assert plan.prediction is not None and plan.prediction.target_measurements > 0
    measured = [i for i in plan.items if i.kind == "config" and i.task_id == "rmsnorm"]
    assert measured and plan.try_first == measured[0]
    kb.close()



def test_time_ratios_read_as_extra_time() -> None:
    assert time_vs_best(1.2) == "+20% time vs the best"
    assert time_vs_best(0.83, "its best so far") == "-17% time vs its best so far"
    assert time_vs_best(1.001) == "as fast as the best" and time_vs_best(None) == "time unknown"


def test_query_hits_carry_id_and_shape_and_neutral_is_not_a_win(
        seeded: LocalKnowledge, cli_store: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["query", "--op", "rmsnorm", "--gpu", "NVIDIA H200", "-k", "8",
                     "--max-chars", "30000", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    block, hits = result["prompt_block"], result["hits"]
    neutral = [h for h in hits if h["record"]["verdict"] == "neutral"]
    assert neutral, "the seeds' rmsnorm hits hold a neutral one"
    worked_part = block.split("Tried with no clear gain")[0]
    for hit in hits:
        head = next(line for line in block.splitlines()
                    if line.startswith("[") and line.endswith(f"| id {hit['id'][:10]}"))
        shapes = block.split(head, 1)[1].splitlines()[1]
        timed = [t["shape"] for t in hit["record"]["feedback"]["timings"]]
        assert shapes.strip().startswith("timed on " if timed else "shape set ")
        assert not timed or timed[0] in shapes
        in_worked = head in worked_part
        assert in_worked == (hit["record"]["verdict"] == "improved"), head
