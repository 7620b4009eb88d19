"""``kernelkb tasks shapes`` and ``optimize --model-config`` / ``--shapes AxB``: the shapes
a user's model gives, printed without a GPU, threaded into the run's options, and a bad
config refused in one line (exit 2) before the store opens.

The real CLI (kernelkb.cli.main) in process; no optimizer loop runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelkb.cli.main import build_parser, main
from kernelkb.cli.model_flags import run_shapes
from kernelkb.kernels.discovery import get_task
from kernelkb.kernels.model_config import shipped_configs
from kernelkb.optimizer.loop import LoopOptions
from kernelkb.optimizer.session import regime_plan


def test_tasks_shapes_prints_them_by_regime(home: Path, capsys: pytest.CaptureFixture[str]
                                            ) -> None:
    path = str(shipped_configs()["llama-3-8b"])
    assert main(["tasks", "shapes", "rmsnorm", "--model-config", path, "--batch", "1,8"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "rmsnorm in llama-3-8b: 4 shapes (rows x hidden), by regime"
    few, many = out.index("few_rows:"), out.index("many_rows:")
    assert few < out.index("8x4096 ") < many < out.index("16384x4096 ")
    assert "decode b=8 kv=2048" in out and "prefill b=8 s=2048" in out
    assert main(["tasks", "shapes", "attention", "--model-config", "qwen2.5-7b"]) == 0
    assert "4 KV heads run as 28" in capsys.readouterr().out
    assert not home.exists()


def test_tasks_shapes_says_why_a_task_has_none(tmp_path: Path, home: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    gpt2 = tmp_path / "gpt2.json"
    gpt2.write_text('{"n_embd": 768, "n_head": 12, "vocab_size": 50257, '
                    '"layer_norm_epsilon": 1e-05, "activation_function": "gelu_new"}')
    assert main(["tasks", "shapes", "rmsnorm", "--model-config", str(gpt2)]) == 0
    assert capsys.readouterr().out.strip() == (
        "rmsnorm in gpt2: no shape: the model normalises with LayerNorm (its config names a "
        "LayerNorm epsilon), not RMSNorm")


BAD = [("no-hidden.json", '{"num_attention_heads": 32, "vocab_size": 32000}',
        "no hidden_size (nor n_embd, d_model)"),
       ("not-json.json", "hidden_size = 4096", "not JSON"),
       (None, None, "no such file")]


@pytest.mark.parametrize(("name", "text", "message"), BAD, ids=["no-hidden", "not-json",
                                                                 "missing"])
def test_a_bad_config_is_one_line_and_exit_2(
        tmp_path: Path, home: Path, name: str | None, text: str | None, message: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / (name or "absent.json")
    if text is not None:
        path.write_text(text)
    assert main(["optimize", "rmsnorm", "--model-config", str(path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0]
    assert main(["tasks", "shapes", "rmsnorm", "--model-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not home.exists()


@pytest.mark.parametrize(("argv", "message"), [
    (["--shapes", "1x4096x2"], "--shapes: 1x4096x2 is not a rows x hidden shape of rmsnorm"),
    (["--shapes", "1x4096", "--model-config", "llama-3-8b"], "give one"),
    (["--model-config", "llama-3-8b", "--batch", "0"], "--batch '0': sizes must be above 0"),
    (["--model-config", "llama-3-8b", "--seq", "long"], "--seq 'long': whole numbers"),
])
def test_optimize_refuses_bad_shape_flags(home: Path, argv: list[str], message: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["optimize", "rmsnorm", *argv]) == 2
    assert message in capsys.readouterr().err
    assert not home.exists()


def test_the_model_shapes_reach_the_regime_plan() -> None:
    """On a GPU the model's shapes are the sweep and pick the regimes; each regime's rounds
    time its edge shapes and the model's; on a CPU they pick the regimes only."""
    task = get_task("rmsnorm")
    args = build_parser().parse_args(["optimize", "rmsnorm", "--model-config", "llama-3-8b",
                                      "--batch", "1,8"])
    given = run_shapes(args, task, on_gpu=True)
    assert given.sweep_shapes == [(2048, 4096), (16384, 4096), (1, 4096), (8, 4096)]
    assert given.regimes == ("few_rows", "many_rows") and given.shapes == "auto"
    plan, _ = regime_plan(task, LoopOptions(shapes=given.shapes, sweep_shapes=given.sweep_shapes,
                                            regimes=given.regimes), on_gpu=True)
    assert plan["few_rows"][1] == [(1, 4096), (8, 4096)]
    assert {(1, 4096), (8, 4096)} <= set(plan["few_rows"][0])
    assert plan["many_rows"][1] == [(2048, 4096), (16384, 4096)]
    decode = run_shapes(build_parser().parse_args(
        ["optimize", "rmsnorm", "--model-config", "llama-3-8b", "--batch", "1,8", "--regime",
         "few_rows"]), task, on_gpu=False)
    assert decode.regimes == ("few_rows",) and decode.sweep_shapes == "auto"
    assert "no GPU here" in decode.said[-1] and "none small enough" not in decode.said[-1]
    both = run_shapes(args, task, on_gpu=False)
    assert both.regimes == ("few_rows", "many_rows") and both.sweep_shapes == "auto"
    assert both.said[-1].endswith("; many_rows: none small enough for it, tuned on a GPU only")
    listed = run_shapes(build_parser().parse_args(
        ["optimize", "rmsnorm", "--shapes", "3x4096,1x3584"]), task, on_gpu=False)
    assert listed.shapes == listed.sweep_shapes == [(3, 4096), (1, 3584)]
