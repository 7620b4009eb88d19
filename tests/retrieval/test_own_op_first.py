"""Item 6 on the shipped seeds: the task's own experiences first, related ops labelled and
filling in, no edit twice; related ops come from the tasks' declarations only."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from kb_testdata import make_knowledge

from kernelkb.cli import main as cli
from kernelkb.kernels.discovery import TASKS, all_tasks, get_task, related_ops_of
from kernelkb.optimizer.recall import query_for, recall
from kernelkb.retrieval.query import RetrievalQuery
from kernelkb.retrieval.row_cache import edit_keys
from kernelkb.retrieval.schemas import Hit, RetrievalResult
from kernelkb.service import LocalKnowledge

SEEDS = Path(__file__).resolve().parents[2] / "seeds"
H200 = "NVIDIA H200"


@pytest.fixture(scope="module")
def seeded_vectors(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKnowledge]:
    """The shipped seeds with vectors on (the conftest's `seeded` has none): retrieval
    here ranks by cosine and full text, as a user's store does."""
    kb = make_knowledge(tmp_path_factory.mktemp("seeded"), seeds_dir=SEEDS)
    assert all(not r.rejected for r in kb.seed().values())
    yield kb
    kb.close()


def _own_wins(kb: LocalKnowledge, op: str) -> int:
    return kb.list(op_type=op, gpu_name=H200, verdict="improved", limit=1).total


def _keys(hit: Hit) -> set[tuple[str, str]]:
    e = hit.record.edit
    return edit_keys("|" + "|".join(e.categories) + "|", dict(e.config), e.summary, e.diff)


def _check(result: RetrievalResult, op: str, relatives: tuple[str, ...]) -> None:
    hits = result.hits
    for hit in hits:
        assert hit.related == (hit.record.task.op_type != op), hit.id
        assert not hit.related or hit.record.task.op_type in relatives, hit.id
    flags = [h.related for h in hits]
    assert flags == sorted(flags), "a related op's hit came before one of the op's own"
    for n, hit in enumerate(hits):  # never the same edit twice
        assert all(not (_keys(hit) & _keys(other)) for other in hits[:n]), hit.record.edit
    for hit in hits:  # each entry by its id prefix (neutral entries follow the wins)
        line = next(x for x in result.prompt_block.splitlines()
                    if x.startswith("[") and x.endswith(f"| id {(hit.id or '')[:10]}"))
        assert ("(related op " in line) == hit.related, line


@pytest.mark.parametrize("task_name", sorted(all_tasks()))
def test_each_task_on_its_h200_gets_its_own_wins_first(seeded_vectors: LocalKnowledge,
                                                       task_name: str) -> None:
    task = get_task(task_name)
    for k in (5, 15):
        query = RetrievalQuery(op_type=task.op_type, gpu_name=H200, k=k, max_chars=50_000,
                               related_ops=list(task.related_ops))
        result = seeded_vectors.retrieve(query)
        _check(result, task.op_type, task.related_ops)
        if _own_wins(seeded_vectors, task.op_type):
            assert not result.hits[0].related
            own = [h for h in result.hits if not h.related]
            assert own[0].record.env.gpu_name == H200
            if any(h.related for h in result.hits):  # related fill in only after own ran out
                assert len(own) < k


def test_softmax_no_longer_crowded_out_by_attention(seeded_vectors: LocalKnowledge) -> None:
    """The issue's case: five hits, all attention's RoPE-table flip, none of softmax's."""
    query = RetrievalQuery(op_type="softmax", gpu_name=H200, related_ops=["rmsnorm",
                                                                         "attention"])
    hits = seeded_vectors.retrieve(query).hits
    assert len(hits) == 5 and all(h.record.task.op_type == "softmax" for h in hits)
    assert sum("ROPE_TABLE" in h.record.edit.summary for h in hits) == 0
    # k past the store's distinct softmax edits on the H200, so related ops fill in
    wide = seeded_vectors.retrieve(query.model_copy(update={"k": 50, "max_chars": 100_000}))
    assert sum(not h.related for h in wide.hits) < 50
    # attention's RoPE-table edits may fill in among the related, each once (its two
    # directions are two edits), never ahead of softmax's own
    rope = [h for h in wide.hits if "ROPE_TABLE" in h.record.edit.summary]
    assert all(h.related for h in rope)
    assert len({h.record.edit.summary.split(":")[0] for h in rope}) == len(rope)
    assert "From related ops" in wide.prompt_block


def test_cli_fills_related_ops_from_the_tasks(seeded_vectors: LocalKnowledge, monkeypatch,
                                              capsys) -> None:
    monkeypatch.setenv("KERNELKB_DATA_DIR", str(seeded_vectors.settings.data_dir))
    monkeypatch.setenv("KERNELKB_VECTORS", "false")  # the same SQL store, BM25 + ladder only
    assert cli.main(["query", "--op", "rope", "--gpu", H200, "-k", "40", "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)["hits"]
    related = {h["record"]["task"]["op_type"] for h in hits if h["related"]}
    assert related and related <= set(related_ops_of("rope"))
    assert cli.main(["query", "--op", "rope", "--gpu", H200, "-k", "40", "--no-related",
                     "--json"]) == 0
    assert not any(h["related"] for h in json.loads(capsys.readouterr().out)["hits"])


def test_a_new_tasks_declared_relatives_reach_retrieval(seeded_vectors: LocalKnowledge) -> None:
    """A user's task with an op the store has never seen: its declared relative's
    experiences answer, labelled related, through the optimizer's query and the registry."""
    base = get_task("rmsnorm")
    task = dataclasses.replace(base, name="throwaway_layernorm", op_type="throwaway_norm",
                               related_ops=("rmsnorm",))
    TASKS[task.name] = task
    try:
        assert related_ops_of("throwaway_norm") == ("rmsnorm",)
        env = seeded_vectors.get(seeded_vectors.list(op_type="rmsnorm", limit=1).items[0].id).env
        result = seeded_vectors.retrieve(query_for(task, "float16", env, k=5))
        assert result.hits and all(h.related and h.record.task.op_type == "rmsnorm"
                                   for h in result.hits)
        recalled = recall(seeded_vectors, task, "float16", env, source=task.template, feedback="")
        assert "(related op rmsnorm" in recalled.few_shot
    finally:
        del TASKS[task.name]
