"""One vocabulary at every door: the op is ``op`` and the count ``limit`` on the CLI, over
HTTP and over MCP; the older names (``op_type``, ``k``, ``--top``, ``-k``, ``--kernel``)
still work. An MCP argument of the wrong type is a sentence, not pydantic's dump; every
CLI flag has help, and says its default."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from kb_testdata import record_dict
from live_server import live_server  # noqa: E402
from mcp import Client

from kernelkb.mcp.server import build_server  # noqa: E402
from kernelkb.service import LocalKnowledge


@pytest.fixture
def backend() -> dict[str, Any]:
    """``knowledge`` (tests/conftest.py) on the SQLite file, without vectors: the doors'
    names are checked, not the backends."""
    return {"vectors": False}


@pytest.fixture
def four_edits(knowledge: LocalKnowledge) -> LocalKnowledge:
    """``knowledge`` holding four softmax edits on an H200."""
    knowledge.ingest([record_dict(hw="H200", summary=f"edit {i}", config={"N": i})
                      for i in range(4)])
    return knowledge


def test_http_takes_op_and_limit_and_the_older_names(four_edits: LocalKnowledge) -> None:
    kb = four_edits
    with live_server(kb) as port:
        base = f"http://127.0.0.1:{port}"
        new = httpx.get(f"{base}/insights", params={"op": "softmax"}, timeout=60).json()
        old = httpx.get(f"{base}/insights", params={"op_type": "softmax"}, timeout=60).json()
        assert new["total"] == old["total"] == 4
        both = httpx.get(f"{base}/insights", params={"op": "softmax", "op_type": "rope"},
                         timeout=60)
        assert both.status_code == 422 and "give one" in both.text
        listed = httpx.get(f"{base}/experiences", params={"op": "SOFTMAX", "limit": 2},
                           timeout=60).json()
        assert len(listed["items"]) == 2
        assert httpx.get(f"{base}/names", params={"op": "Softmax"},
                         timeout=60).json()["op_type"] == "softmax"
        hits = httpx.post(f"{base}/retrieve", json={"op": "softmax", "limit": 2},
                          timeout=60).json()["hits"]
        older = httpx.post(f"{base}/retrieve", json={"op_type": "softmax", "k": 2},
                           timeout=60).json()["hits"]
        assert len(hits) == len(older) == 2
        plan = httpx.post(f"{base}/bootstrap", json={"env": {"gpu_name": "NVIDIA H100 SXM"},
                                                     "op": "softmax", "limit": 2}, timeout=60)
        assert plan.status_code == 200, plan.text
        schema = httpx.get(f"{base}/openapi.json", timeout=60).json()
        params = {p["name"]: p for p in schema["paths"]["/insights"]["get"]["parameters"]}
        assert params["op_type"].get("deprecated") and not params["op"].get("deprecated")


def test_mcp_takes_op_and_limit_and_says_type_errors_in_words(
        four_edits: LocalKnowledge, tmp_path: Path) -> None:
    server = build_server(four_edits, journal_dir=tmp_path / "journals")

    async def calls() -> dict[str, object]:
        async with Client(server) as client:
            async def call(name: str, arguments: dict) -> object:
                return await client.call_tool(name, arguments)
            return {
                "new": await call("retrieve_experiences", {"op": "softmax", "limit": 2}),
                "old": await call("retrieve_experiences", {"op_type": "softmax", "k": 2}),
                "insights": await call("insights", {"op": "softmax"}),
                "both": await call("insights", {"op": "softmax", "op_type": "rope"}),
                "none": await call("retrieve_experiences", {}),
                "type": await call("retrieve_experiences", {"op": "softmax", "limit": "five"}),
                "bound": await call("retrieve_experiences", {"op": "softmax", "limit": 500}),
                "extra": await call("insights", {"op": "softmax", "top_k": 3}),
            }

    out = asyncio.run(calls())
    text = {k: v.content[0].text for k, v in out.items()}  # type: ignore[attr-defined]
    for ok in ("new", "old", "insights"):
        assert not out[ok].is_error, text[ok]  # type: ignore[attr-defined]
    assert text["new"].count('"id"') == text["old"].count('"id"')
    assert "give one" in text["both"] and "op is required" in text["none"]
    assert "limit" in text["type"] and "'five'" in text["type"]
    assert "limit must be at most 50, not 500." in text["bound"]
    assert "top_k is not an argument of this tool" in text["extra"]
    for key in ("type", "bound", "extra"):
        assert out[key].is_error  # type: ignore[attr-defined]
        for raw in ("pydantic", "http", "Arguments", "validation error"):
            assert raw not in text[key], (key, text[key])


def test_every_cli_flag_has_help_and_its_default() -> None:
    from kernelkb.cli.main import build_parser

    parser = build_parser()
    missing, parsers = [], [("kernelkb", parser)]
    while parsers:
        name, p = parsers.pop()
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers += [(f"{name} {n}", sub) for n, sub in action.choices.items()]
            elif not isinstance(action, argparse._HelpAction | argparse._VersionAction) \
                    and not action.help:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, missing
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    text = sub.choices["optimize"].format_help()
    assert "(default: 6)" in text  # --patience
    assert "--limit N, -k N" in sub.choices["query"].format_help()
    assert "--op NAME, --kernel NAME" in sub.choices["import"].format_help()



def test_revalidate_names_its_task_as_optimize_and_sweep_do(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``revalidate TASK`` like ``optimize TASK`` and ``sweep TASK``; ``--task`` is the
    deprecated older form and still works; a refused count is said as ``--limit``."""
    from kernelkb.cli.main import main

    said = {}
    for key, argv in {"new": ["revalidate", "sofmax"], "old": ["revalidate", "--task", "sofmax"],
                      "both": ["revalidate", "softmax", "--task", "rope"],
                      "none": ["revalidate"], "limit": ["revalidate", "softmax", "--limit", "0"],
                      "top": ["revalidate", "softmax", "--top", "0"]}.items():
        assert main(argv) == 2, key
        said[key] = capsys.readouterr().err
    assert "unknown task 'sofmax'; closest: 'softmax'" in said["new"]
    assert said["old"] == said["new"]
    assert "give one (--task is the deprecated older way to name TASK)" in said["both"]
    assert "kernelkb revalidate TASK" in said["none"]
    assert "--limit 0: must be at least 1" in said["limit"] == said["top"]
    assert not home.exists()  # each refused before the store opened


def test_query_says_a_refused_value_with_the_flag_typed(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kernelkb.cli.main import main

    assert main(["query", "--op", "softmax", "--limit", "0", "--max-chars", "10"]) == 2
    err = capsys.readouterr().err
    assert "--limit 0: Input should be greater than or equal to 1" in err
    assert "--max-chars 10: Input should be greater than or equal to 200" in err
    assert "k:" not in err and "max_chars" not in err
    assert not home.exists()


def test_help_says_which_names_are_deprecated() -> None:
    from kernelkb.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    helps = {name: " ".join(sub.choices[name].format_help().split())
             for name in ("query", "revalidate", "import", "sweep")}
    assert "(-k: deprecated, its older name)" in helps["query"]
    assert "--task TASK the task the kernel is for" in helps["query"]  # a task is TASK
    assert "--top: deprecated, its older name" in helps["revalidate"]
    assert "--task TASK deprecated: the older way to name TASK" in helps["revalidate"]
    assert "--kernel: deprecated, its older name" in helps["import"]
    for name in ("revalidate", "sweep"):  # the task: the first word, as optimize takes it
        assert "positional arguments: TASK a task's name, e.g. softmax" in helps[name]


@pytest.fixture
def two_tasks(knowledge: LocalKnowledge) -> LocalKnowledge:
    """``knowledge`` holding three softmax edits and two rmsnorm ones on an H200."""
    knowledge.ingest(
        [record_dict(hw="H200", summary=f"edit {i}", config={"N": i}) for i in range(3)]
        + [record_dict(op="rmsnorm", hw="H200", summary=f"norm {i}", config={"M": i})
           for i in range(2)])
    return knowledge


def test_http_names_the_task_task_as_every_door_does(two_tasks: LocalKnowledge) -> None:
    """The task is "task" over HTTP as on the CLI (TASK, --task) and in MCP's
    evaluate_kernel; "task_id", its older name, still works; a name given under both
    names with two values is an error in words, in a body as in a query string."""
    with live_server(two_tasks) as port:
        base = f"http://127.0.0.1:{port}"

        def get(path: str, **params: object) -> httpx.Response:
            return httpx.get(f"{base}{path}", params=params, timeout=60)

        def post(path: str, body: dict) -> httpx.Response:
            return httpx.post(f"{base}{path}", json=body, timeout=60)

        assert get("/experiences", task="SOFTMAX").json()["total"] == 3
        assert get("/experiences", task_id="softmax").json()["total"] == 3
        both = get("/experiences", task="softmax", task_id="rmsnorm")
        assert both.status_code == 422 and "give one" in both.text
        found = get("/names", op="Softmax", task="RMSNorm").json()
        assert (found["op"], found["task"]) == ("softmax", "rmsnorm")
        assert (found["op_type"], found["task_id"]) == ("softmax", "rmsnorm")  # older clients
        new = post("/retrieve", {"op": "softmax", "task": "softmax", "limit": 2})
        old = post("/retrieve", {"op_type": "softmax", "task_id": "softmax", "k": 2})
        assert new.status_code == old.status_code == 200, (new.text, old.text)
        assert [h["record"]["id"] for h in new.json()["hits"]] == \
            [h["record"]["id"] for h in old.json()["hits"]]
        same = post("/retrieve", {"op": "softmax", "op_type": "softmax", "limit": 2})
        assert same.status_code == 200, same.text
        for body in ({"op": "softmax", "op_type": "rope"},
                     {"op": "softmax", "limit": 2, "k": 3},
                     {"op": "softmax", "task": "softmax", "task_id": "rope"}):
            refused = post("/retrieve", body)
            assert refused.status_code == 422 and "give one" in refused.text, refused.text
        plan = post("/bootstrap", {"env": {"gpu_name": "NVIDIA H100 SXM"}, "op": "softmax",
                                   "op_type": "rope"})
        assert plan.status_code == 422 and "give one" in plan.text, plan.text
        schema = get("/openapi.json").json()
        params = {p["name"]: p for p in schema["paths"]["/experiences"]["get"]["parameters"]}
        assert params["task_id"].get("deprecated") and not params["task"].get("deprecated")


def test_mcp_names_the_task_task_in_every_tool(two_tasks: LocalKnowledge,
                                               tmp_path: Path) -> None:
    server = build_server(two_tasks, journal_dir=tmp_path / "journals")

    async def calls() -> dict[str, object]:
        async with Client(server) as client:
            async def call(arguments: dict) -> object:
                return await client.call_tool("retrieve_experiences", arguments)
            return {"new": await call({"op": "softmax", "task": "softmax", "limit": 3}),
                    "old": await call({"op": "softmax", "task_id": "softmax", "limit": 3}),
                    "both": await call({"op": "softmax", "task": "softmax",
                                        "task_id": "rope"})}

    out = asyncio.run(calls())
    text = {k: v.content[0].text for k, v in out.items()}  # type: ignore[attr-defined]
    assert not out["new"].is_error and not out["old"].is_error, text  # type: ignore[attr-defined]
    assert text["new"] == text["old"]
    assert out["both"].is_error and "task 'softmax' and task_id 'rope': give one" in \
        text["both"]  # type: ignore[attr-defined]


def test_the_remote_client_sends_the_current_names(two_tasks: LocalKnowledge) -> None:
    """RemoteKnowledge (an MCP server or a run pointed at a service) asks with the names
    the service documents, not the deprecated ones. The requests are the real ones sent
    to the real service, read off the client as they leave."""
    import json

    from kernelkb.retrieval.query import RetrievalQuery
    from kernelkb.retrieval.remote import RemoteKnowledge

    sent: list[set[str]] = []

    def keys(request: httpx.Request) -> None:
        body = json.loads(request.content) if request.content else {}
        sent.append(set(request.url.params.keys()) | set(body))

    with live_server(two_tasks) as port:
        remote = RemoteKnowledge(f"http://127.0.0.1:{port}")
        remote._client.event_hooks["request"].append(keys)
        try:
            assert remote.resolve_names(op_type="Softmax", task_id="softmax")["op_type"] \
                == "softmax"
            assert remote.insights(op_type="softmax").total == 3
            assert len(remote.retrieve(RetrievalQuery(op_type="softmax", task_id="softmax",
                                                      k=2)).hits) == 2
            remote.bootstrap({"gpu_name": "NVIDIA H100 SXM"}, op_type="softmax", limit=2)
        finally:
            remote.close()
    assert len(sent) == 4
    for asked in sent:
        assert not asked & {"op_type", "k", "task_id"}, asked
