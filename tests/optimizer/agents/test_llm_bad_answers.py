"""What a real endpoint can answer besides a chat completion: a 200 with cut-off JSON, a
proxy's HTML page, an empty body, no answer at all. Each is one sentence and a failed
round, never a traceback; the run still ends with its report.

The real LLM agent (openai client) against a real HTTP server on loopback
(tests/optimizer/agents/llm_server.py); a real SQLite store for the whole run.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest
from llm_server import DROP, HANG, Raw, ScriptedLLM, llm_server

from kernelkb.cli.main import main
from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.agents.base import AgentContext, AgentUnavailable
from kernelkb.optimizer.agents.llm import LLMAgent, LLMSettings
from kernelkb.optimizer.loop import LoopOptions
from kernelkb.optimizer.policy import PolicyConfig, StopReason
from kernelkb.optimizer.session import optimize
from kernelkb.service import LocalKnowledge

TASK = get_task("softmax")
CUT = Raw('{"id": "x", "object": "chat.completion", "choices": [{"index": 0, '
          '"message": {"role": "assistant", "content": "```python\\nimport tri')
PAGE = Raw("<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad "
           "Gateway</h1></center><hr><center>nginx</center></body></html>", "text/html")
SIGN_IN = Raw("<!DOCTYPE html><html><body><h1>Sign in &amp; continue</h1></body></html>")


def _agent(url: str, **settings: float) -> LLMAgent:
    return LLMAgent(LLMSettings(base_url=url, model="scripted", api_key="k", **settings))


def _context(iteration: int = 1) -> AgentContext:
    return AgentContext(task=TASK, dtype="float16", iteration=iteration,
                        round_kind="exploit", best_source=TASK.template)


@pytest.mark.parametrize(("answer", "said"), [
    (CUT, f"answered asking for an edit with HTTP 200 and JSON cut off after {len(CUT.body)} "
          "characters"),
    (Raw('{"id": "x", "choices": [],'), "JSON cut off after 26 characters"),
    (PAGE, 'HTTP 200 and an HTML page ("502 Bad Gateway"), not JSON'),
    (SIGN_IN, 'an HTML page ("Sign in & continue"), not JSON'),  # sent as application/json
    (Raw(""), "HTTP 200 and an empty body"),
    (Raw("null"), "JSON that holds no choices[0].message"),
    (Raw('{"error": {"message": "model overloaded"}}'),
     "JSON that holds no choices[0].message: model overloaded"),
    (DROP, "closed the connection without an answer while asking for an edit"),
])
def test_a_bad_answer_is_a_failed_proposal_saying_what_came(answer: object, said: str) -> None:
    with llm_server([answer] * 3) as url:
        proposal = _agent(url, retries=0).propose(_context())
    assert proposal.source is None
    assert said in (proposal.error or "")
    assert proposal.summary == f"no usable reply: {proposal.error}"
    assert "\n" not in proposal.summary
    assert len(ScriptedLLM.requests) == 1  # a 200 is an answer: not asked again


def test_a_reply_cut_at_max_tokens_says_so() -> None:
    cut = {"id": "x", "object": "chat.completion", "created": 0, "model": "scripted",
           "choices": [{"index": 0, "finish_reason": "length", "message": {
               "role": "assistant", "content": "CHANGE: 8 warps\n```python\nimport triton\n"}}]}
    with llm_server([Raw(json.dumps(cut))]) as url:
        proposal = _agent(url, retries=0).propose(_context())
    assert proposal.source is None
    assert proposal.error == ("the reply was cut off at max_tokens (4096) before a whole "
                              "```python block defining run(...)")


def test_no_answer_costs_the_timeout_given_and_three_silent_rounds_stop() -> None:
    with llm_server([HANG] * 6) as url:
        agent = _agent(url, timeout_s=0.5, retries=1)
        began = time.monotonic()
        first = agent.propose(_context(1))
        spent = time.monotonic() - began
        second = agent.propose(_context(2))
        with pytest.raises(AgentUnavailable) as err:
            agent.propose(_context(3))
    assert 1.0 <= spent < 4.0  # two tries of 0.5 s and the client's backoff, not 363 s
    assert "gave no answer within 0.5 s while asking for an edit (2 attempts; " \
           "--llm-timeout-s sets the wait)" in (first.error or "")
    assert second.source is None
    assert "3 rounds in a row without an answer: stopping the run" in str(err.value)
    assert len(ScriptedLLM.requests) == 6


def test_three_replies_without_code_say_the_model_looks_misconfigured(
        caplog: pytest.LogCaptureFixture) -> None:
    good = f"```python\n{TASK.render({'NUM_WARPS': 8})}```\nCHANGE: 8 warps"
    script = [(200, "I cannot help.")] * 2 + [(200, good)] + [PAGE, (200, "no"), CUT, CUT]
    caplog.set_level(logging.WARNING, logger="kernelkb")
    with llm_server(script) as url:
        agent = _agent(url, retries=0)
        warned = []
        for n in range(1, len(script) + 1):
            agent.propose(_context(n))
            warned.append(sum("looks misconfigured" in r.getMessage() for r in caplog.records))
    assert warned == [0, 0, 0, 0, 0, 1, 1]  # the good reply restarted the count
    message = next(r.getMessage() for r in caplog.records
                   if "looks misconfigured" in r.getMessage())
    assert "3 replies in a row without code from model 'scripted'" in message
    assert "JSON cut off" not in message  # each round's line said it: not twice


TINY = LoopOptions(shapes=[(4, 128)], sweep_shapes=[(4, 128)], seeds=1, timeout_s=300)


@pytest.fixture
def backend() -> dict[str, Any]:
    """``knowledge`` (tests/conftest.py) without vectors: the run's recall reads SQL."""
    return {"vectors": False}


@pytest.mark.slow  # over 20 s: the default run stays under 10 minutes
def test_a_run_through_bad_answers_ends_with_its_report_and_says_each_once(
        knowledge: LocalKnowledge, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    lines: list[str] = []
    with llm_server([CUT, PAGE, HANG], models=["scripted"]) as url:
        result = optimize("softmax", _agent(url, timeout_s=1.0, retries=0),
                          out_dir=tmp_path / "runs", knowledge=knowledge, options=TINY,
                          policy=PolicyConfig(max_iters=3, patience=5),
                          on_round=lambda outcome: lines.append(outcome.summary))
    assert result.stop_reason is StopReason.max_iters
    assert [r.verdict for r in result.rounds] == ["neutral", "failed", "failed", "failed"]
    assert [r.feedback.error_kind for r in result.records[1:4]] == ["unusable_reply"] * 3
    assert "JSON cut off" in lines[1] and "HTML page" in lines[2]
    assert "gave no answer within 1 s" in lines[3]
    assert result.report_path is not None and result.report_path.is_file()
    for said in ("JSON cut off", "HTML page", "gave no answer"):  # the round's line only
        assert not [r for r in caplog.records if said in r.getMessage()]


def test_the_cli_timeout_flag_reaches_the_client(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KERNELKB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KERNELKB_LLM_API_KEY", "k")
    with llm_server([], models_status=HANG) as url:
        began = time.monotonic()
        status = main(["optimize", "softmax", "--agent", "llm", "--model", "m",
                       "--base-url", url, "--llm-timeout-s", "0.5"])
    assert status == 1 and time.monotonic() - began < 5
    err = capsys.readouterr().err
    assert "gave no answer within 0.5 s while listing the models (1 attempt; " in err
    assert err.count("gave no answer") == 1
    assert main(["optimize", "softmax", "--agent", "llm", "--model", "m", "--base-url", url,
                 "--llm-timeout-s", "0"]) == 2
    assert "--llm-timeout-s: must be above 0" in capsys.readouterr().err
