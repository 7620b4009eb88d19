"""A model's config.json gives each task the shapes it runs there (kernels/model_shapes.py):
the shipped configs against sizes worked out by hand, the other families' key names, and
a config that cannot give them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kernelkb.kernels.discovery import get_task
from kernelkb.kernels.model_config import (
    ModelConfigError,
    facts_of,
    read_model_config,
    shipped_configs,
)
from kernelkb.kernels.model_shapes import DERIVE, check_shape, model_shapes, parse_shapes

LLAMA = read_model_config("llama-3-8b")  # hidden 4096, 32 heads / 8 KV, 14336, 128256


def shapes(task: str, model=LLAMA, batches=(1, 8), seqs=(2048,)) -> list[tuple[int, ...]]:
    found = model_shapes(get_task(task), model, batches, seqs)
    assert found.reason is None, found.reason
    return found.shapes


def test_llama_3_8b_rows_and_mlp_by_hand() -> None:
    # prefill b x 2048 tokens, then decode one token per sequence
    assert shapes("rmsnorm") == [(2048, 4096), (16384, 4096), (1, 4096), (8, 4096)]
    assert shapes("swiglu") == [(2048, 14336), (16384, 14336), (1, 14336), (8, 14336)]
    assert shapes("rmsnorm", LLAMA, [1, 8], [2048]) == shapes("rmsnorm")


def test_llama_3_8b_projections_by_hand() -> None:
    found = model_shapes(get_task("matmul"), LLAMA, [8], [2048])
    decode = [u.shape for u in found.uses if u.phase == "decode"]
    # qkv: (32 + 2 x 8) heads x 128; o; gate and up fused; down; the LM head
    assert decode == [(8, 6144, 4096), (8, 4096, 4096), (8, 28672, 4096), (8, 4096, 14336),
                      (8, 128256, 4096)]
    assert (16384, 6144, 4096) in found.shapes and (16384, 4096, 14336) in found.shapes
    assert found.labels((8, 128256, 4096)) == ["prefill lm_head b=8", "decode lm_head b=8"]
    assert {get_task("matmul").regime(s) for s in decode} == {"skinny"}


def test_llama_3_8b_heads_by_hand() -> None:
    assert shapes("rope", batches=[8]) == [(8, 2048, 32, 8, 128), (8, 1, 32, 8, 128)]
    attention = model_shapes(get_task("attention"), LLAMA, [8], [4096])
    assert attention.shapes == [(8, 32, 4096, 0, 128), (8, 32, 1, 4096, 128)]
    assert "8 KV heads run as 32" in attention.notes[0]  # the task has no GQA
    # sampling over the vocabulary, then score rows: heads x new tokens by the KV length
    assert shapes("softmax", batches=[8]) == [(8, 128256), (8 * 32 * 2048, 2048),
                                              (8 * 32, 2048)]


def test_qwen_and_mixtral_by_hand() -> None:
    qwen = read_model_config("qwen2.5-7b")
    assert (1, 4608, 3584) in shapes("matmul", qwen)  # (28 + 2 x 4) x 128
    assert shapes("rope", qwen, [1]) == [(1, 2048, 28, 4, 128), (1, 1, 28, 4, 128)]
    mixtral = read_model_config("mixtral-8x7b")
    # 2 of 8 experts per token: an expert sees a quarter of the tokens (at least one)
    assert shapes("swiglu", mixtral) == [(512, 14336), (4096, 14336), (1, 14336), (2, 14336)]


def test_every_shipped_config_gives_every_task_shapes_it_accepts() -> None:
    assert set(shipped_configs()) == {"llama-3-8b", "qwen2.5-7b", "mixtral-8x7b"}
    for path in shipped_configs().values():
        model = read_model_config(path)
        for name in DERIVE:
            task = get_task(name)
            found = shapes(name, model, (1, 8, 32), (512, 4096))
            assert found and all(check_shape(task, s) == s for s in found)
            assert {u.phase for u in model_shapes(task, model, [1], [512]).uses} == {
                "prefill", "decode"}


def test_gpt2_keys_and_what_it_lacks() -> None:
    gpt2 = facts_of({"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_inner": None,
                     "n_positions": 1024, "vocab_size": 50257, "layer_norm_epsilon": 1e-5,
                     "activation_function": "gelu_new"}, "gpt2")
    assert (gpt2.hidden, gpt2.heads, gpt2.kv_heads, gpt2.head_dim, gpt2.intermediate) == (
        768, 12, 12, 64, 3072)
    reasons = {n: model_shapes(get_task(n), gpt2, [1], [1024]).reason for n in DERIVE}
    assert "LayerNorm" in reasons["rmsnorm"] and "gelu_new" in reasons["swiglu"]
    assert "no rotary embedding" in reasons["rope"] and "RoPE" in reasons["attention"]
    assert reasons["softmax"] is None and reasons["matmul"] is None
    matmul = shapes("matmul", gpt2, [1], [1024])
    assert (1024, 2304, 768) in matmul and (1024, 3072, 768) in matmul  # qkv; up, ungated


def test_text_config_and_an_explicit_head_dim_win() -> None:
    nested = facts_of({"model_type": "llava", "hidden_size": 1152, "text_config": {
        "hidden_size": 2560, "num_attention_heads": 32, "num_key_value_heads": 8,
        "head_dim": 128, "intermediate_size": 9728, "vocab_size": 151936,
        "rms_norm_eps": 1e-6, "rope_theta": 1e6}}, "vl")
    assert (nested.hidden, nested.head_dim, nested.kv_heads) == (2560, 128, 8)  # not 80
    assert shapes("rope", nested, [1]) == [(1, 2048, 32, 8, 128), (1, 1, 32, 8, 128)]


@pytest.mark.parametrize(("text", "message"), [
    ('{"num_attention_heads": 32, "vocab_size": 32000}', "no hidden_size (nor n_embd, d_model)"),
    ("hidden_size: 4096", "not JSON (Expecting value, line 1)"),
    ("[4096]", "not a JSON object"),
    ('{"hidden_size": 4096, "num_attention_heads": 0, "vocab_size": 1}',
     "num_attention_heads = 0: not a positive integer"),
])
def test_a_bad_config_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(ModelConfigError) as err:
        read_model_config(path)
    assert message in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ModelConfigError, match="no such file"):
        read_model_config(tmp_path / "missing.json")


def test_listed_shapes_are_checked_against_the_task() -> None:
    rmsnorm = get_task("rmsnorm")
    assert parse_shapes("1x4096, 2048x4096,1x4096", rmsnorm) == [(1, 4096), (2048, 4096)]
    for bad in ("1x4096x2", "0x4096", "rows=1", ""):
        with pytest.raises(ValueError):
            parse_shapes(bad, rmsnorm)
    assert parse_shapes("1x32x1x2047x128", get_task("attention")) == [(1, 32, 1, 2047, 128)]
    with pytest.raises(ValueError):  # a cache may be empty, new tokens may not
        parse_shapes("1x32x0x0x128", get_task("attention"))


def test_a_task_without_a_derivation_says_so() -> None:
    mine = replace(get_task("rmsnorm"), name="my_rmsnorm")
    found = model_shapes(mine, LLAMA, [1], [2048])
    assert not found.uses and "no derivation for task my_rmsnorm" in (found.reason or "")
    assert "--shapes" in (found.reason or "")


def test_shipped_configs_are_json_objects() -> None:
    for path in shipped_configs().values():
        assert isinstance(json.loads(path.read_text()), dict)
