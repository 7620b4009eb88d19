"""The service's edge, probed as an attacker would: bad values are 4xx naming the field,
never 500; a batch keeps its good records; writes are closed unless opened on purpose."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from kb_testdata import make_knowledge, record_dict
from live_server import live_server

from kb.api.access import is_loopback, write_policy

TOKEN = "edge-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    kb = make_knowledge(tmp_path_factory.mktemp("edge"), api_token=TOKEN)
    with live_server(kb) as port:
        yield f"http://127.0.0.1:{port}"


def _post(url: str, path: str, raw: str, headers: dict | None = None) -> httpx.Response:
    return httpx.post(url + path, content=raw.encode("utf-8", "surrogatepass"), timeout=60,
                      headers={"content-type": "application/json", **AUTH, **(headers or {})})


def test_batch_with_one_huge_integer_keeps_the_good(url: str) -> None:
    good = record_dict(summary="edge good record")
    bad = record_dict(summary="edge bad record")
    bad["iteration"] = 10**30
    nan = record_dict(summary="edge nan record")
    raw = "[" + ",".join([json.dumps(good), json.dumps(bad), json.dumps(nan).replace(
        '"time_ms": 0.4', '"time_ms": NaN')]) + "]"
    body = _post(url, "/experiences/batch", raw).json()
    assert len(body["accepted"]) == 1, body
    assert body["rejected"] == [
        {"index": 1, "field": "iteration",
         "reason": "Input should be less than or equal to 10000000"},
        {"index": 2, "field": "feedback.time_ms", "reason": "Input should be a finite number"}]
    stored = httpx.get(f"{url}/experiences/{body['accepted'][0]}").json()
    assert stored["edit"]["summary"] == "edge good record"


@pytest.mark.parametrize(("path", "raw", "field"), [
    ("/experiences", json.dumps(record_dict()).replace('"time_ms": 0.4', '"time_ms": NaN'),
     "feedback.time_ms"),
    ("/experiences", json.dumps(record_dict()).replace('"speedup_vs_parent": 1.3',
                                                       '"speedup_vs_parent": Infinity'),
     "feedback.speedup_vs_parent"),
    ("/experiences", json.dumps(record_dict(summary="s" * 5_000_000)), "edit.summary"),
    ("/experiences", json.dumps(record_dict(op="o" * 100_000)), "task.op_type"),
    ("/experiences", json.dumps(record_dict(summary="a\ud800b")), "edit.summary"),
    ("/retrieve", '{"op_type": "softmax", "k": 1e999}', "k"),
    ("/retrieve", '{"op_type": "soft\\udc00max"}', "op_type"),
    ("/retrieve", '{"op_type": "softmax", "max_chars": 1e400}', "max_chars"),
    ("/bootstrap", '{"env": {"gpu_name": "X", "sm_count": "many"}}', "sm_count"),
    ("/bootstrap", '{"env": {"gpu_name": ["X"], "mem_bandwidth_gbps": {"a": 1}}}', "gpu_name"),
    ("/bootstrap", '{"env": {"gpu_name": "X", "peak_tflops": NaN}}', "peak_tflops"),
    ("/bootstrap", '{"env": "H200"}', "env"),
])
def test_bad_input_is_422_naming_the_field(url: str, path: str, raw: str, field: str) -> None:
    r = _post(url, path, raw)
    assert r.status_code == 422, r.text[:300]
    text = r.text
    assert field.split(".")[-1] in text, text[:300]


def test_paging_offset_past_64_bits_is_422(url: str) -> None:
    for offset in (2**63, 2**64 + 5, 10**30):
        r = httpx.get(f"{url}/experiences", params={"offset": offset})
        assert r.status_code == 422, r.text


def test_any_bearer_bytes_give_401(url: str) -> None:
    body = json.dumps(record_dict(summary="bearer bytes")).encode()
    for token in (b"\xff\xfe", "caf\u00e9".encode(), b"\x80" * 300, TOKEN.encode() + b"\xe9"):
        r = httpx.post(f"{url}/experiences", content=body,
                       headers={"content-type": "application/json",
                                "Authorization": b"Bearer " + token})
        assert r.status_code == 401, (token, r.status_code)


def test_oversized_body_is_413(url: str) -> None:
    r = httpx.post(f"{url}/experiences/batch", content=b"[" + b" " * (65 * 2**20) + b"]",
                   headers={"content-type": "application/json", **AUTH}, timeout=60)
    assert r.status_code == 413


def _non_loopback_address() -> str | None:
    """This machine's address on a real interface, if it has one."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect(("192.0.2.1", 9))  # no packet is sent: picks the outgoing interface
            address = sock.getsockname()[0]
    except OSError:
        return None
    return None if is_loopback(address) else address


def test_without_token_writes_come_from_loopback_only(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    address = _non_loopback_address()
    if address is None:
        pytest.skip("no non-loopback interface on this machine")
    kb = make_knowledge(tmp_path)  # no token
    body = record_dict(summary="loopback only")
    with live_server(kb, host="0.0.0.0") as port:
        assert "accepted from loopback clients only" in caplog.text  # said at start-up
        remote = httpx.post(f"http://{address}:{port}/experiences", json=body, timeout=60)
        assert remote.status_code == 403 and "loopback" in remote.text
        assert httpx.post(f"http://{address}:{port}/reindex", timeout=60).status_code == 403
        assert httpx.get(f"http://{address}:{port}/health", timeout=60).status_code == 200
        local = httpx.post(f"http://127.0.0.1:{port}/experiences", json=body, timeout=60)
        assert local.status_code == 201


def test_write_policy() -> None:
    assert "loopback" in write_policy("127.0.0.1", None)
    assert "token" in write_policy("0.0.0.0", "t")
    with pytest.raises(ValueError, match="KERNELKB_API_TOKEN"):
        write_policy("0.0.0.0", None)
    assert is_loopback("::1") and is_loopback("localhost") and not is_loopback("10.0.0.1")


def test_serve_refuses_a_public_bind_without_token(tmp_path: Path) -> None:
    env = {"KERNELKB_DATA_DIR": str(tmp_path), "KERNELKB_VECTORS": "false",
           "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "kb.cli", "serve", "--host", "0.0.0.0"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "refusing to serve on 0.0.0.0 without a token" in proc.stderr
