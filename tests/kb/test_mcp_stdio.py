"""`kernelkb mcp` over stdio, driven by the MCP SDK's own client: one real server
subprocess for the module, on a temporary store seeded with the shipped softmax space
(real H200 measurements), every tool, the task resources, a real evaluation in the
Triton interpreter that is written back and then retrieved, and calls that must fail
with a tool error while the server keeps serving."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kb_testdata import record_dict
from mcp import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_sync import SyncClient, error_text

from kernelkb.kb import limits
from kernelkb.kb.record import ExperienceRecord
from kernelkb.kb.settings import Settings
from kernelkb.kernels.discovery import all_tasks, get_task
from kernelkb.kernels.shared.hashing import source_hash
from kernelkb.service import LocalKnowledge

REPO = Path(__file__).resolve().parents[2]
TOOLS = {"retrieve_experiences", "insights", "bootstrap_plan", "evaluate_kernel",
         "record_experience"}
SHAPES = [[4, 128], [3, 100]]  # small: every evaluation runs the interpreter


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp")


SEEDED = 40


@pytest.fixture(scope="module")
def mcp(root: Path) -> Iterator[SyncClient]:
    seeds = root / "seeds"
    seeds.mkdir()
    # a share of the shipped softmax sweep: enough for every tool
    lines = (REPO / "seeds" / "sweep_softmax_float16.jsonl").read_text().splitlines(True)
    (seeds / "sweep_softmax_float16.jsonl").write_text("".join(lines[:SEEDED]))
    env = {"KERNELKB_DATA_DIR": str(root / "store"), "KERNELKB_SEEDS_DIR": str(seeds),
           "TRITON_INTERPRET": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    server = StdioServerParameters(command=sys.executable, args=["-m", "kernelkb", "mcp"],
                                   env=env, cwd=str(REPO))
    client = SyncClient(server)
    yield client
    client.close()


def _data(result) -> dict:  # type: ignore[no-untyped-def]
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


def test_every_tool_is_listed_with_a_bounded_schema(mcp: SyncClient) -> None:
    tools = {t.name: t for t in mcp.list_tools().tools}
    assert set(tools) == TOOLS
    evaluate = tools["evaluate_kernel"].input_schema["properties"]
    assert evaluate["source"]["maxLength"] == limits.SOURCE
    assert set(tools["evaluate_kernel"].input_schema["required"]) == {"task", "source",
                                                                     "summary"}
    retrieve = tools["retrieve_experiences"].input_schema["properties"]
    op = retrieve["op"]["anyOf"][0]  # the op and the count: one name at every door
    assert op["maxLength"] == limits.SHORT
    limit = retrieve["limit"]["anyOf"][0]
    assert limit["minimum"] == 1 and limit["maximum"] == 50
    assert "deprecated" in retrieve["op_type"]["description"]
    assert "record" in tools["record_experience"].input_schema["properties"]


def test_task_resources_give_signature_reference_and_shapes(mcp: SyncClient) -> None:
    listed = {str(r.uri) for r in mcp.list_resources().resources}
    assert "kernelkb://tasks" in listed
    catalogue = mcp.json_resource("kernelkb://tasks")
    assert [t["name"] for t in catalogue] == sorted(all_tasks())
    for entry in catalogue:
        task = get_task(entry["name"])
        assert entry["signature"] == task.signature
        assert "def reference" in entry["reference_source"]
        assert entry["shapes"]["edge"] == [list(s) for s in task.edge_shapes]
        assert entry["shape_names"] == list(task.shape_names)
    softmax = mcp.json_resource("kernelkb://tasks/softmax")
    assert softmax["starting_kernel"] == get_task("softmax").template
    with pytest.raises(MCPError, match="unknown task"):
        mcp.read_resource("kernelkb://tasks/no_such_task")


def test_insights_for_an_op_on_a_gpu(mcp: SyncClient) -> None:
    report = _data(mcp.tool("insights", {"op_type": "softmax", "gpu_name": "NVIDIA H200"}))
    assert report["total"] == SEEDED  # the seeded share of the sweep's records
    warps = {c["category"]: c for c in report["categories"]}["warps_stages"]
    assert warps["count"] > 0 and warps["example_ids"]


def test_bootstrap_plan_for_a_new_card(mcp: SyncClient) -> None:
    plan = _data(mcp.tool("bootstrap_plan", {"gpu_name": "NVIDIA H100 SXM",
                                             "op_type": "softmax", "limit": 3}))
    assert plan["similar_hardware"][0]["gpu_name"] == "NVIDIA H200"
    ranked = plan["prediction"]["items"]
    assert len(ranked) == 3 and all(set(i["config"]) >= {"BLOCK_SIZE", "NUM_WARPS"}
                                    for i in ranked)
    assert "unknown" in error_text(mcp.tool("bootstrap_plan", {"gpu_name": "Zorblax 9000"}))
    # on the measured card, for one shape: the configuration measured fastest there
    own = _data(mcp.tool("bootstrap_plan", {"gpu_name": "NVIDIA H200", "op_type": "softmax",
                                            "include_own": True,
                                            "shapes": ["rows=4096,cols=32768"]}))
    fastest = next(i for i in own["items"] if i["kind"] == "config")
    assert "fastest measured softmax" in fastest["evidence"]
    assert "1.00x the fastest time per shape" in fastest["evidence"]


def _stored(root: Path, exp_id: str) -> ExperienceRecord:
    """A record as the server's store holds it, read from its SQLite file directly."""
    store = LocalKnowledge(Settings(data_dir=root / "store", vectors=False))
    try:
        found = store.get(exp_id)
    finally:
        store.close()
    assert found is not None, f"{exp_id} is not in the store"
    return found


@pytest.mark.slow  # over 20 s: the default run stays under 10 minutes
def test_evaluate_writes_back_like_the_loop_and_is_retrieved(mcp: SyncClient,
                                                             root: Path) -> None:
    template = get_task("softmax").template
    # two knobs at once: no sweep record has this diff (retrieval shows one record of a
    # change, the measured one, where several carry it)
    source = template.replace("NUM_WARPS = 4", "NUM_WARPS = 2", 1).replace(
        "NUM_STAGES = 1", "NUM_STAGES = 2", 1)
    summary = "two warps per row for the short rows of small batches"
    out = _data(mcp.tool("evaluate_kernel", {
        "task": "softmax", "source": source, "summary": summary,
        "categories": ["warps_stages"], "shapes": SHAPES, "agent": "test-agent"}))
    # the interpreter checks correctness only: correct and untimed is 'neutral'
    assert out["ok"] and out["verdict"] == "neutral" and out["written"] == "stored"
    # fresh inputs every evaluation: the fp32 reference and the kernel may differ by an ulp
    tolerance = get_task("softmax").tolerances["float16"]
    assert out["feedback"]["stage"] == "correctness" \
        and out["feedback"]["max_abs_err"] <= tolerance.atol
    assert "correctness: pass on 2 shapes" in out["feedback_text"]
    assert out["baseline_record_id"]  # the run's first call wrote its starting kernel too
    hits = _data(mcp.tool("retrieve_experiences", {
        "op_type": "softmax", "feedback_text": summary, "k": 10, "max_chars": 60_000}))
    found = {h["id"]: h for h in hits["hits"]}
    assert out["record_id"] in found
    assert found[out["record_id"]]["summary"] == summary
    assert summary in hits["prompt_block"]

    # the record the loop would write for this round: diff, hashes, config, provenance
    stored = _stored(root, out["record_id"])
    assert "-NUM_WARPS = 4\n-NUM_STAGES = 1\n+NUM_WARPS = 2\n+NUM_STAGES = 2" in stored.edit.diff
    assert stored.edit.parent_hash == source_hash(template)
    assert stored.edit.child_hash == source_hash(source)
    assert stored.edit.config["NUM_WARPS"] == 2 and stored.edit.child_source == source
    assert (stored.iteration, stored.provenance.agent, stored.provenance.round_kind) == \
        (1, "test-agent", "exploit")
    assert stored.task.shape_set == "rows=4,cols=128;rows=3,cols=100"
    assert stored.run_id == out["run_id"] and stored.evidence == "verified"
    start = _stored(root, out["baseline_record_id"])
    assert (start.iteration, start.edit.categories, start.verdict.value) == \
        (0, ["baseline"], "neutral")

    again = _data(mcp.tool("evaluate_kernel", {
        "task": "softmax", "source": source, "summary": "the same again",
        "shapes": SHAPES, "run_id": out["run_id"]}))
    assert again["verdict"] == "invalid" and "identical" in again["feedback_text"]
    comment_only = get_task("softmax").template + "\n# a comment changes nothing\n"
    same = _data(mcp.tool("evaluate_kernel", {
        "task": "softmax", "source": comment_only, "summary": "comment", "shapes": SHAPES}))
    assert same["verdict"] == "invalid" and same["run_id"] == out["run_id"]
    assert same["iteration"] == again["iteration"] + 1 == out["iteration"] + 2
    assert _stored(root, same["record_id"]).feedback.error_kind == "no_change"


@pytest.mark.slow  # > 15 s on two cores
def test_a_failing_candidate_is_an_experience_not_a_tool_error(mcp: SyncClient,
                                                               root: Path) -> None:
    """A module that parses but fails in the sandbox is a round the loop records too."""
    source = get_task("softmax").template + (
        "\n\ndef run(x):\n    raise RuntimeError('no kernel launched here')\n")
    out = _data(mcp.tool("evaluate_kernel", {
        "task": "softmax", "source": source, "summary": "run() that raises",
        "shapes": SHAPES}))
    assert not out["ok"] and out["verdict"] == "failed" and out["written"] == "stored"
    assert "FAILED (runtime_error)" in out["feedback_text"]
    assert "no kernel launched here" in out["feedback_text"]
    assert _stored(root, out["record_id"]).feedback.error_kind == "runtime_error"


def test_record_validates_like_ingest_and_is_idempotent(mcp: SyncClient) -> None:
    record = record_dict(summary="recorded from an agent over MCP", config={"BLOCK_SIZE": 4096})
    first = _data(mcp.tool("record_experience", {"record": record}))
    assert first["status"] == "stored"
    assert _data(mcp.tool("record_experience", {"record": record})) == {**first,
                                                                        "status": "duplicate"}
    bad = record_dict(summary="bad")
    bad["env"]["sm_count"] = 0
    assert "sm_count" in error_text(mcp.tool("record_experience", {"record": bad}))
    nan = record_dict(summary="not finite")
    nan["feedback"]["speedup_vs_parent"] = "NaN"
    assert "speedup_vs_parent" in error_text(mcp.tool("record_experience", {"record": nan}))


@pytest.mark.parametrize(("arguments", "expected"), [
    ({"task": "no_such_task"}, "unknown task 'no_such_task'"),
    ({"source": "def run(x:\n    return x\n"}, "not valid Python: line 1"),
    ({"source": "import torch\nOUT = 1\n"}, "no top-level run("),
    ({"source": "x" * (limits.SOURCE + 1)}, "source"),
    ({"categories": ["magic"]}, "categories"),
    ({"shapes": [[4, 128, 9]]}, "does not match"),
    ({"dtype": "int8"}, "dtype"),
    ({"run_id": "softmax-never-started"}, "no run 'softmax-never-started'"),
])
def test_bad_calls_are_tool_errors(mcp: SyncClient, arguments: dict, expected: str) -> None:
    call = {"task": "softmax", "source": get_task("softmax").template + "\nZ = 1\n",
            "summary": "a bad call", "shapes": SHAPES, **arguments}
    assert expected in error_text(mcp.tool("evaluate_kernel", call))


def test_oversized_and_out_of_bound_reads_are_tool_errors(mcp: SyncClient) -> None:
    assert "op_type" in error_text(mcp.tool("retrieve_experiences", {"op_type": "x" * 300}))
    assert "k" in error_text(mcp.tool("retrieve_experiences", {"op_type": "softmax", "k": 0}))
    assert "name the GPU" in error_text(mcp.tool("bootstrap_plan", {}))
    # and the server is still there
    assert _data(mcp.tool("insights", {"op_type": "softmax"}))["total"] > 0



def test_the_starting_kernel_itself_is_the_baseline_round(mcp: SyncClient,
                                                          root: Path) -> None:
    out = _data(mcp.tool("evaluate_kernel", {
        "task": "softmax", "source": get_task("softmax").template, "summary": "as it is",
        "shapes": [[2, 64]]}))
    assert (out["iteration"], out["verdict"], out["ok"]) == (0, "neutral", True)
    assert out["record_id"] == out["baseline_record_id"]
    assert _stored(root, out["record_id"]).edit.categories == ["baseline"]


def test_every_unreadable_line_is_answered_and_the_session_goes_on(tmp_path: Path) -> None:
    """Lines the SDK cannot read as JSON-RPC get JSON-RPC's own errors (with the request's
    id where one can be read), instead of silence that leaves the client waiting."""
    import queue
    import subprocess
    import threading

    env = {"KERNELKB_DATA_DIR": str(tmp_path / "store"), "KERNELKB_SEEDS_DIR": str(tmp_path),
           "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "1"}}}
    lines = [json.dumps(init), '{"jsonrpc":"2.0","method":"notifications/initialized"}',
             "not json at all",
             '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"\\ud800"}}',
             '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"insig',
             "[1, 2]",
             '{"jsonrpc":"2.0","id":9,"method":"tools/list"}']
    server = subprocess.Popen([sys.executable, "-m", "kernelkb", "mcp"], cwd=REPO, env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        server.stdin.write("\n".join(lines) + "\n")
        server.stdin.flush()
        out: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [out.put(line) for line in server.stdout],
                         daemon=True).start()
        replies = [json.loads(out.get(timeout=60)) for _ in range(6)]  # Empty: one unanswered
    finally:
        server.kill()
        server.wait()
    by_id = {}
    for reply in replies:
        by_id.setdefault(reply["id"], []).append(reply)
    assert by_id[1][0]["result"]["serverInfo"]
    # a lone surrogate is JSON to Python but not to the SDK: invalid request, with its id
    assert by_id[5][0]["error"]["code"] == -32600 and "JSON" in by_id[5][0]["error"]["message"]
    # a line cut short is not JSON: JSON-RPC says parse error, id null
    assert [r["error"]["code"] for r in by_id[None]] == [-32700, -32700, -32600]
    assert {t["name"] for t in by_id[9][0]["result"]["tools"]} == TOOLS
