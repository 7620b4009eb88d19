"""The LLM agent end to end against a real OpenAI-compatible server on loopback.

The server replays scripted replies: a good edit, a malformed reply, a comment-only edit,
a transient 500 and then another good edit. The knowledge service is down (a closed
port), so every experience goes to the journal, which is then ingested twice into a real
store and stored once.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from llm_server import ScriptedLLM, llm_server

from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.agents.llm import LLMAgent, LLMSettings
from kernelkb.optimizer.loop import LoopOptions
from kernelkb.optimizer.policy import PolicyConfig, StopReason
from kernelkb.optimizer.session import optimize
from kernelkb.optimizer.writeback import Journal
from kernelkb.retrieval.remote import RemoteKnowledge

pytestmark = pytest.mark.slow
TASK = get_task("softmax")


def block(source: str, change: str) -> str:
    return f"```python\n{source}```\nCHANGE: {change}\nWHY: test\nCATEGORIES: warps_stages"


SCRIPT: list[tuple[int, str]] = [
    (200, block(TASK.render({"NUM_WARPS": 8}), "use 8 warps")),
    (200, "Sorry, I cannot help with that without more profiling data."),
    (200, block(TASK.template.replace("def run(x):", "# faster now: less smem\ndef run(x):"),
                "reduced shared memory use")),
    (500, "upstream overloaded"),
    (200, block(TASK.render({"ROWS_PER_PROGRAM": 2}), "two rows per program")),
]


@pytest.fixture
def llm_server_url():
    with llm_server(SCRIPT) as url:
        yield url


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_llm_rounds_are_classified_and_the_journal_ingests_once(
        tmp_path: Path, llm_server_url: str, knowledge) -> None:
    agent = LLMAgent(LLMSettings(base_url=llm_server_url, model="scripted", api_key="k"))
    down = RemoteKnowledge(f"http://127.0.0.1:{closed_port()}", timeout=2.0)
    result = optimize("softmax", agent, out_dir=tmp_path, knowledge=down,
                      policy=PolicyConfig(max_iters=4, patience=10),
                      options=LoopOptions(shapes=[(4, 128)], sweep_shapes=[(4, 128)],
                                          seeds=1, timeout_s=120))
    assert result.stop_reason is StopReason.max_iters
    verdicts = [r.verdict for r in result.rounds]
    assert verdicts == ["neutral", "neutral", "failed", "invalid", "neutral"]
    assert result.records[2].feedback.error_kind == "unusable_reply"
    assert "comments" in result.records[3].feedback.error_message
    assert result.records[1].provenance.model == "scripted"
    assert result.records[1].edit.categories == ["warps_stages"]
    assert len(ScriptedLLM.requests) == 5  # four rounds + one retry after the 500
    last_prompt = ScriptedLLM.requests[-1]["messages"][1]["content"]
    assert "round 2: your reply was unusable" in last_prompt
    assert "round 3 was INVALID" in last_prompt

    journal = Journal(result.journal_path)
    records = journal.read()
    assert [r.id for r in records] == [r.id for r in result.records]
    first = knowledge.ingest(records)
    again = knowledge.ingest(journal.read())
    assert len(first.accepted) == len(records) and not first.rejected
    assert again.accepted == [] and len(again.duplicates) == len(records)
    assert knowledge.stats()["experiences"] == len(records)
