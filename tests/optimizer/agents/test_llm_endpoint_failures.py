"""Failures of the machinery are not experiences: an LLM endpoint that is down, refuses
the key or rate-limits fails the run fast, with a clear message and bounded, stated
retries (the openai client's own), and nothing is written to the store.

The real LLM agent (openai client) against a real OpenAI-compatible server on loopback
(tests/optimizer/agents/llm_server.py) or a closed port; real SQLite stores."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
from llm_server import ScriptedLLM, llm_server

from kernelkb.cli.main import main
from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.agents.base import AgentUnavailable
from kernelkb.optimizer.agents.llm import LLMAgent, LLMSettings
from kernelkb.optimizer.loop import LoopOptions
from kernelkb.optimizer.policy import PolicyConfig, StopReason
from kernelkb.optimizer.session import optimize
from kernelkb.service import LocalKnowledge

TASK = get_task("softmax")
TINY = LoopOptions(shapes=[(4, 128)], sweep_shapes=[(4, 128)], seeds=1, timeout_s=300)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def backend() -> dict[str, Any]:
    """``knowledge`` (tests/conftest.py) without vectors: these tests count rows."""
    return {"vectors": False}


def _agent(url: str) -> LLMAgent:
    return LLMAgent(LLMSettings(base_url=url, model="scripted", api_key="k"))


def _run(url: str, tmp_path: Path, knowledge: LocalKnowledge) -> None:
    optimize("softmax", _agent(url), out_dir=tmp_path / "runs", knowledge=knowledge,
             policy=PolicyConfig(max_iters=2, patience=5), options=TINY)


def test_an_endpoint_that_is_down_fails_before_anything_is_stored(
        tmp_path: Path, knowledge: LocalKnowledge) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    with pytest.raises(AgentUnavailable) as err:
        _run(url, tmp_path, knowledge)
    message = str(err.value)
    assert f"the LLM endpoint {url} failed while listing the models" in message
    assert "APIConnectionError" in message and "gave up after 1 attempt " in message
    assert knowledge.stats()["experiences"] == 0
    assert not (tmp_path / "runs").exists()  # no run was started, no journal either


def test_a_refused_key_fails_at_once_without_retries(tmp_path: Path,
                                                     knowledge: LocalKnowledge) -> None:
    with llm_server([], models_status=401) as url, pytest.raises(AgentUnavailable) as err:
        _run(url, tmp_path, knowledge)
    message = str(err.value)
    assert "refused listing the models: HTTP 401 (AuthenticationError)" in message
    assert "check KERNELKB_LLM_API_KEY" in message and "not retried" in message
    assert len(ScriptedLLM.gets) == 1
    assert knowledge.stats()["experiences"] == 0


def test_rate_limits_before_the_run_fail_it_at_once(tmp_path: Path,
                                                   knowledge: LocalKnowledge) -> None:
    """The preflight asks once: a run that cannot start says so without waiting."""
    with llm_server([], models_status=429, headers={"Retry-After": "0"}) as url, \
            pytest.raises(AgentUnavailable) as err:
        _run(url, tmp_path, knowledge)
    assert "HTTP 429 (RateLimitError)" in str(err.value)
    assert "gave up after 1 attempt " in str(err.value)
    assert len(ScriptedLLM.gets) == 1
    assert knowledge.stats()["experiences"] == 0


def test_a_chat_call_that_is_refused_raises_instead_of_a_failed_round() -> None:
    """A round's own request: 401 is AgentUnavailable, never a 'failed' proposal."""
    from kernelkb.optimizer.agents.base import AgentContext

    context = AgentContext(task=TASK, dtype="float16", iteration=1, round_kind="exploit",
                           best_source=TASK.template)
    with llm_server([(401, "invalid api key")]) as url, \
            pytest.raises(AgentUnavailable) as err:
        _agent(url).propose(context)
    assert "refused asking for an edit: HTTP 401" in str(err.value)
    # a round's request is retried by the client, waits as the server asks
    for status in (503, 429):
        with llm_server([(status, "overloaded")] * 3, headers={"retry-after-ms": "10"}) \
                as url, pytest.raises(AgentUnavailable) as err:
            _agent(url).propose(context)
        assert f"HTTP {status}" in str(err.value)
        assert "gave up after 3 attempts" in str(err.value)
        assert len(ScriptedLLM.requests) == 3


def test_the_cli_says_why_and_exits_before_opening_the_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KERNELKB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KERNELKB_LLM_BASE_URL", f"http://127.0.0.1:{closed_port()}/v1")
    monkeypatch.setenv("KERNELKB_LLM_API_KEY", "k")
    monkeypatch.chdir(tmp_path)
    status = main(["optimize", "softmax", "--agent", "llm", "--model", "m"])
    assert status == 1
    assert "gave up after 1 attempt " in capsys.readouterr().err
    assert not (tmp_path / "home").exists() and not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_an_endpoint_failing_mid_run_stops_it_and_keeps_only_real_rounds(
        tmp_path: Path, knowledge: LocalKnowledge, caplog: pytest.LogCaptureFixture) -> None:
    good = (f"```python\n{TASK.render({'NUM_WARPS': 8})}```\nCHANGE: use 8 warps\n"
            "WHY: test\nCATEGORIES: warps_stages")
    with llm_server([(200, good), (401, "key revoked")], models=["scripted"]) as url:
        result = optimize("softmax", _agent(url), out_dir=tmp_path / "runs", knowledge=knowledge,
                          policy=PolicyConfig(max_iters=3, patience=5), options=TINY)
    assert result.stop_reason is StopReason.agent_unavailable
    assert "HTTP 401" in (result.failure or "")
    assert "HTTP 401" not in caplog.text  # the caller says it once (the CLI: one line)
    assert [r.iteration for r in result.records] == [0, 1]  # baseline and the real round
    assert knowledge.stats()["experiences"] == 2
    report = result.report_path.read_text()
    assert "**agent_unavailable** (the LLM endpoint" in report


def test_without_an_endpoint_or_a_key_the_cli_says_how_to_give_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """No silent default to the public endpoint: a local server's URL, or a key."""
    monkeypatch.setenv("KERNELKB_HOME", str(tmp_path / "home"))
    for name in ("KERNELKB_LLM_BASE_URL", "KERNELKB_LLM_API_KEY", "OPENAI_BASE_URL",
                 "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    status = main(["optimize", "softmax", "--agent", "llm", "--model", "m"])
    assert status == 2
    err = capsys.readouterr().err
    assert "--base-url URL" in err and "Ollama" in err
    assert not (tmp_path / "home").exists()


def test_base_url_names_the_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KERNELKB_HOME", str(tmp_path / "home"))
    for name in ("KERNELKB_LLM_BASE_URL", "KERNELKB_LLM_API_KEY", "OPENAI_BASE_URL",
                 "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    port = closed_port()
    status = main(["optimize", "softmax", "--agent", "llm", "--model", "m",
                   "--base-url", f"http://127.0.0.1:{port}/v1"])
    assert status == 1  # asked, and it is down: the endpoint given is the one asked
    assert f"127.0.0.1:{port}" in capsys.readouterr().err
