"""Names a person types: any case, short forms ('h200', 'A100-80GB'), and an unknown name
gets the closest known one and the list, never an empty answer or another GPU's.

Real seeded store (vectors off: names are SQL filters), the real CLI in process and the
real HTTP service on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from live_server import live_server  # noqa: E402

from kernelkb.cli.main import main
from kernelkb.retrieval.names import UnknownName, match_gpu, match_name
from kernelkb.service import LocalKnowledge

H200 = "NVIDIA H200"


@pytest.fixture
def cli_home(seeded: LocalKnowledge, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = seeded.settings.data_dir
    monkeypatch.setenv("KERNELKB_HOME", str(home))
    monkeypatch.setenv("KERNELKB_VECTORS", "false")
    return home


@pytest.fixture
def backend() -> dict[str, Any]:
    """``knowledge`` (tests/conftest.py) without vectors: names are SQL filters."""
    return {"vectors": False}


@pytest.fixture(scope="module")
def service(seeded: LocalKnowledge) -> Iterator[str]:
    with live_server(seeded) as port:
        yield f"http://127.0.0.1:{port}"


def test_names_match_in_any_case_and_spelling() -> None:
    ops = ["rmsnorm", "softmax", "swiglu"]
    assert match_name("op", "RMS_Norm", ops) == "rmsnorm"
    assert match_name("op", " SoftMax", ops) == "softmax"
    for typed in ("h200", "H200", "nvidia-h200", "NVIDIA H200"):
        assert match_gpu(typed, [H200, "cpu-interpreter"]) == H200
    # a known part with no experiences here: the facts table's name, not a typo
    assert match_gpu("A100-80GB", [H200]) == "NVIDIA A100-SXM4-80GB"
    assert match_gpu("CPU-Interpreter", [H200, "cpu-interpreter"]) == "cpu-interpreter"


def test_unknown_names_say_the_closest_and_the_known_ones() -> None:
    with pytest.raises(UnknownName) as err:
        match_name("op", "sofmax", ["rmsnorm", "softmax"])
    assert str(err.value) == "unknown op 'sofmax'; closest: 'softmax'; known: rmsnorm, softmax"
    with pytest.raises(UnknownName) as err:
        match_gpu("H2000", [H200, "cpu-interpreter"])
    text = str(err.value)
    assert "unknown GPU 'H2000'; closest: 'NVIDIA H200'" in text
    assert "NVIDIA A100-SXM4-80GB" in text and "cpu-interpreter" in text


def _insights(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(["insights", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_cli_insights_take_short_and_odd_cased_names(cli_home: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    status, exact, _ = _insights(["--op", "softmax", "--gpu", H200], capsys)
    assert status == 0 and int(exact.split()[0]) > 0
    for gpu, op in (("h200", "SoftMax"), ("H200", "SOFTMAX"), ("nvidia h200", "soft_max")):
        status, out, err = _insights(["--op", op, "--gpu", gpu], capsys)
        assert status == 0, err
        assert out == exact


def test_cli_unknown_names_are_errors_with_the_closest(cli_home: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = _insights(["--op", "softmax", "--gpu", "H2000"], capsys)
    assert status == 2 and out == ""
    assert "kernelkb insights: unknown GPU 'H2000'; closest: 'NVIDIA H200'" in err
    assert "Traceback" not in err
    status, _, err = _insights(["--op", "sofmax"], capsys)
    assert status == 2 and "unknown op 'sofmax'; closest: 'softmax'; known:" in err
    assert main(["query", "--op", "rmsnorm", "--gpu", "H2000"]) == 2
    assert "unknown GPU 'H2000'" in capsys.readouterr().err
    assert main(["bootstrap", "--op", "softmax", "--gpu", "H2000"]) == 2
    assert "closest: 'NVIDIA H200'" in capsys.readouterr().err


def test_a_known_gpu_without_experiences_says_what_the_store_has(
        cli_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _insights(["--op", "softmax", "--gpu", "A100-80GB"], capsys)
    assert status == 0
    assert out.startswith("0 experiences (op=softmax, gpu=NVIDIA A100-SXM4-80GB)")
    assert "no experiences of softmax on NVIDIA A100-SXM4-80GB in this store" in out
    assert f"GPUs with experiences: {H200} (" in out


def test_cli_query_and_bootstrap_take_short_names(cli_home: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["query", "--op", "RMSNorm", "--gpu", "h200", "-k", "2"]) == 0
    block = capsys.readouterr().out
    assert "rmsnorm/rmsnorm" in block and f"on {H200}" in block
    assert main(["bootstrap", "--op", "SoftMax", "--gpu", "h200", "--json"]) == 0
    assert f'"gpu_name": "{H200}"' in capsys.readouterr().out


def test_api_matches_names_and_rejects_unknown_ones(service: str) -> None:
    exact = httpx.get(f"{service}/insights", params={"op_type": "softmax", "gpu_name": H200},
                      timeout=60).json()
    short = httpx.get(f"{service}/insights", params={"op_type": "SoftMax", "gpu_name": "h200"},
                      timeout=60).json()
    assert short == exact and exact["total"] > 0
    bad = httpx.get(f"{service}/insights", params={"op_type": "softmax", "gpu_name": "H2000"},
                    timeout=60)
    assert bad.status_code == 422
    assert "closest: 'NVIDIA H200'" in bad.json()["detail"]
    hits = httpx.post(f"{service}/retrieve", json={"op_type": "RMSNorm", "gpu_name": "h200"},
                      timeout=60).json()["hits"]
    assert hits and all(h["record"]["env"]["gpu_name"] == H200 for h in hits)
    typo = httpx.post(f"{service}/retrieve", json={"op_type": "rmsnrom"}, timeout=60)
    assert typo.status_code == 422 and "closest: 'rmsnorm'" in typo.json()["detail"]
    listed = httpx.get(f"{service}/experiences", params={"gpu_name": "h200", "limit": 1},
                       timeout=60).json()
    assert listed["total"] > 0
    plan = httpx.post(f"{service}/bootstrap", json={"env": {"gpu_name": "H100"},
                                                    "op_type": "SOFTMAX"}, timeout=120)
    assert plan.status_code == 200, plan.text
    assert plan.json()["target"]["gpu_name"] == "NVIDIA H100 80GB HBM3"


def test_api_takes_a_programs_names_as_given(service: str) -> None:
    """The optimizer sends the card and op it runs on, which may be new: no 422."""
    new_card = httpx.post(f"{service}/retrieve", json={
        "op_type": "fused_add_rmsnorm", "gpu_name": "NVIDIA L40S", "arch": "sm_89",
        "check_names": False, "related_ops": ["rmsnorm"]}, timeout=60)
    assert new_card.status_code == 200, new_card.text
    assert new_card.json()["hits"]  # rmsnorm's, labelled as a related op
    insights = httpx.get(f"{service}/insights", params={"op_type": "fused_add_rmsnorm",
                                                        "arch": "cpu", "check_names": False},
                         timeout=60)
    assert insights.status_code == 200 and insights.json()["total"] == 0


def test_ids_printed_by_the_cli_work_in_the_api(cli_home: Path, service: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["insights", "--op", "softmax", "--gpu", "h200"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines()
            if "%" in line and not line.startswith("category")]
    prefix = rows[0].split()[-1].rstrip(",")  # the first example id, as printed
    assert len(prefix) == 10
    got = httpx.get(f"{service}/experiences/{prefix}", timeout=60)
    assert got.status_code == 200 and got.json()["id"].startswith(prefix)
    full = got.json()["id"]
    assert httpx.get(f"{service}/experiences/{full}", timeout=60).json()["id"] == full
    assert main(["show", prefix]) == 0
    assert f'"id": "{full}"' in capsys.readouterr().out
    ambiguous = httpx.get(f"{service}/experiences/{full[0]}", timeout=60)
    assert ambiguous.status_code == 400
    assert "matches several experiences" in ambiguous.json()["detail"]
    assert main(["show", full[0]]) == 2
    assert "give more characters" in capsys.readouterr().err
    assert httpx.get(f"{service}/experiences/zzzz", timeout=60).status_code == 404


def test_a_name_written_after_the_last_read_is_found(knowledge: LocalKnowledge) -> None:
    """Names resolve against the vocabulary as last read (no round trip per request); a
    name that vocabulary lacks sends resolution to the store, so a new op or GPU is found
    on its first query, and one nobody has stays unknown."""
    from kb_testdata import record_dict

    kb = knowledge
    kb.ingest([record_dict(hw="H200")])
    assert kb.resolve_names(op_type="SOFTMAX")["op_type"] == "softmax"  # vocabulary read
    kb.ingest([record_dict(op="layernorm_fused", task="layernorm_fused", summary="new op")])
    assert kb.resolve_names(op_type="Layernorm_Fused")["op_type"] == "layernorm_fused"
    with pytest.raises(UnknownName):
        kb.resolve_names(op_type="no_such_op")
    kb.close()
