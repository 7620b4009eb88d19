"""The structural variants the H200 needs (issue 13): the long-row softmax path, the
persistent TMA matmul (with split-K summed in the kernel, and the flattened loop), and the
flash-style attention prefill, each in the CPU interpreter against the task's reference;
and the shared memory their compiled kernels used on the H200 against the tasks' model.

The interpreter runs ``tl.make_tensor_descriptor`` (Triton 3.9 here; the H200 has 3.6), and
checks TMA's alignment rules as the hardware does, so the TMA path runs here on shapes with
16-byte aligned rows; other shapes take the tiled kernel, which the tests check too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from kernel_checks import assert_task_close, check_config
from triton.runtime.jit import KernelInterface

from kernelkb.kernels.candidate_loading import load_candidate
from kernelkb.kernels.discovery import get_task

RESULTS = Path(__file__).parents[2] / "benchmarks" / "results"


def _launches(module) -> list[str]:
    """Wrap each Triton kernel run() launches (named *_kernel; the other @triton.jit
    functions are helpers called inside them) so that its launches are recorded by name."""
    launched: list[str] = []
    for name, kernel in vars(module).copy().items():
        if isinstance(kernel, KernelInterface) and name.endswith("_kernel"):
            setattr(module, name, _Named(kernel, name, launched))
    return launched


class _Named:
    def __init__(self, kernel, name: str, launched: list[str]) -> None:
        self.kernel, self.name, self.launched = kernel, name, launched

    def __getitem__(self, grid):
        def call(*args, **kwargs):
            self.launched.append(self.name)
            return self.kernel[grid](*args, **kwargs)
        return call


# -- softmax: the long-row path ---------------------------------------------------------
SOFTMAX = get_task("softmax")


@pytest.mark.parametrize("block,warps", [(4096, 8), (16384, 16)])
@pytest.mark.parametrize("dtype", SOFTMAX.dtypes)
def test_long_rows_take_the_chunked_path_and_match_the_reference(block, warps, dtype, seed,
                                                                  device):
    config = {"LONG_ROW_BLOCK": block, "NUM_WARPS": warps}
    # 40000: a last chunk that is partly masked; 32768: exactly the threshold
    for shape in ((3, 40000), (1, 32768)):
        check_config(SOFTMAX, config, shape, dtype, seed=seed, device=device)


def test_only_long_rows_leave_the_whole_row_tile(seed, device):
    config = {**SOFTMAX.default_config, "LONG_ROW_BLOCK": 8192, "NUM_WARPS": 16}
    module = load_candidate(SOFTMAX.render(config), "softmax_long_dispatch")
    launched = _launches(module)
    for shape, kernel in (((2, 70000), "softmax_long_row_kernel"),
                          ((3, 32767), "softmax_kernel"), ((4, 128), "softmax_kernel")):
        launched.clear()
        (x,) = SOFTMAX.make_inputs(shape, torch.float16, seed, device)
        assert_task_close(SOFTMAX, "float16", module.run(x), SOFTMAX.reference(x),
                          label=str(shape))
        assert launched == [kernel], (shape, launched)
        assert SOFTMAX.launch(config, shape).programs == shape[0]


def test_a_row_of_one_huge_value_keeps_its_mass_in_the_long_path(device):
    """The running max grows in the last chunk: the sum of the earlier chunks is rescaled."""
    config = {**SOFTMAX.default_config, "LONG_ROW_BLOCK": 4096, "NUM_WARPS": 8}
    module = load_candidate(SOFTMAX.render(config), "softmax_long_rescale")
    x = torch.zeros((1, 40000), dtype=torch.float32, device=device)
    x[0, -1] = 30.0
    y = module.run(x)
    assert_task_close(SOFTMAX, "float32", y, SOFTMAX.reference(x), label="late max")
    assert abs(float(y.sum()) - 1.0) < 1e-5


# -- matmul: persistent TMA kernel ----------------------------------------------------------
MATMUL = get_task("matmul")
TMA_POINTS = [c for c in MATMUL.space() if c["PERSISTENT_TMA"]]
# rows 16-byte aligned (TMA path): partial tiles in M and N; K=1000 splits unevenly
TMA_SHAPES = ((40, 72, 104), (130, 136, 1000))


def _tma_module(config: dict, programs: int, name: str):
    module = load_candidate(MATMUL.render(config), name)
    module._sm_count = lambda device: programs  # a persistent grid of this many programs
    return module


def test_the_tma_space_points_are_the_measured_tiles():
    assert len(TMA_POINTS) == 10
    assert {c["SPLIT_K"] for c in TMA_POINTS} == {1, 4}
    assert sum(c["FLATTEN"] for c in TMA_POINTS) == 2


@pytest.mark.parametrize("config", TMA_POINTS, ids=lambda c: "-".join(map(str, c.values())))
def test_every_tma_point_matches_the_reference_on_aligned_shapes(config, seed, device):
    module = _tma_module(config, 3, "matmul_tma_point")
    launched = _launches(module)
    for shape in TMA_SHAPES:
        a, b = MATMUL.make_inputs(shape, torch.float16, seed, device)
        assert_task_close(MATMUL, "float16", module.run(a, b), MATMUL.reference(a, b),
                          label=f"{shape} {config}")
    assert set(launched) == {"matmul_tma_kernel"}  # one kernel, split-K summed inside


def test_split_k_counters_are_reset_for_the_next_call(seed, device):
    config = {**MATMUL.default_config, "PERSISTENT_TMA": True, "BLOCK_M": 64, "BLOCK_N": 64,
              "SPLIT_K": 4, "NUM_STAGES": 4}
    module = _tma_module(config, 5, "matmul_tma_counters")
    a, b = MATMUL.make_inputs((33, 200, 512), torch.float16, seed, device)
    first = module.run(a, b)
    assert all(int(c.abs().sum()) == 0 for c in module._COUNTERS.values())
    assert torch.equal(module.run(a, b), first)  # same order of partial sums: same bits
    assert_task_close(MATMUL, "float16", first, MATMUL.reference(a, b), label="split-K")


def test_unaligned_rows_fall_back_to_the_tiled_kernel(seed, device):
    config = {**MATMUL.default_config, "PERSISTENT_TMA": True, "BLOCK_M": 128,
              "BLOCK_N": 128, "GROUP_M": 8, "NUM_WARPS": 8, "NUM_STAGES": 4}
    module = _tma_module(config, 3, "matmul_tma_fallback")
    launched = _launches(module)
    for shape in ((7, 33, 65), (64, 100, 64)):  # K * 2 or N * 2 bytes not a multiple of 16
        a, b = MATMUL.make_inputs(shape, torch.float16, seed, device)
        assert_task_close(MATMUL, "float16", module.run(a, b), MATMUL.reference(a, b),
                          label=str(shape))
        assert MATMUL.launch(config, shape).programs_per_sm_cap == 0
    assert set(launched) == {"matmul_kernel"}
    assert MATMUL.launch(config, (64, 96, 128)).programs_per_sm_cap == 1


def test_tma_needs_the_c_tile_in_shared_memory_only_on_its_path():
    config = {**MATMUL.default_config, "PERSISTENT_TMA": True, "BLOCK_M": 128,
              "BLOCK_N": 256, "GROUP_M": 8, "NUM_WARPS": 8, "NUM_STAGES": 3}
    operands = 3 * (128 * 64 + 64 * 256) * 2
    assert MATMUL.smem_bytes(config, (4096, 4096, 4096), torch.float16) == \
        operands + 128 * 256 * 2
    assert MATMUL.smem_bytes(config, (7, 33, 65), torch.float16) == operands


# -- attention: flash-style prefill -------------------------------------------------------
ATTENTION = get_task("attention")
FLASH = {**ATTENTION.default_config, "FLASH": True, "CAUSAL_SKIP": True, "ROPE_TABLE": True,
         "BLOCK_M": 64, "BLOCK_N": 64}


@pytest.mark.parametrize("overrides", [{}, {"ROPE_TABLE": False, "BLOCK_N": 32},
                                       {"EVEN_SEQ": True}], ids=str)
def test_flash_prefill_writes_the_cache_and_matches_the_reference(overrides, seed, device):
    """Several query blocks (run last-first) over a cached prefix and without one."""
    from test_attention import check_attention

    config = {**FLASH, **overrides}
    assert ATTENTION.why_illegal(config) is None
    for shape in ((1, 2, 200, 0, 64), (2, 1, 128, 64, 32), (1, 2, 3, 61, 64)):
        check_attention(config, shape, "float16", seed=seed, device=device)


def test_flash_keeps_rope_and_the_cache_write_in_two_launches(seed, device):
    module = load_candidate(ATTENTION.render(FLASH), "attention_flash_launches")
    launched = _launches(module)
    inputs = ATTENTION.make_inputs((1, 2, 70, 10, 32), torch.float16, seed, device)
    module.run(*inputs)
    assert launched == ["kv_write_kernel", "flash_attention_kernel"]
    assert ATTENTION.launch(FLASH, (1, 2, 70, 10, 32)).programs == 2 * 2 * 2


def test_flash_is_refused_with_the_fused_cache_write():
    assert "FLASH" in ATTENTION.why_illegal({**FLASH, "FUSE_KV_WRITE": True})
    assert "FLASH" in ATTENTION.why_illegal({**FLASH, "CAUSAL_SKIP": False})


# -- shared memory on the H200 ---------------------------------------------------------------
def test_the_model_covers_what_the_variants_used_on_the_h200():
    """benchmarks/variants.py recorded each compiled configuration's shared memory on the
    H200; the tasks' model must never predict less."""
    data = json.loads((RESULTS / "variants_explore_h200.json").read_text())
    assert data["env"]["gpu_name"] == "NVIDIA H200"
    checked = 0
    for row in data["rows"]:
        task = get_task(row["task"])
        shape = task.parse_shape(row["shape"])
        for label, overrides in row["configs"].items():
            used = row["smem"][label]["used"]
            config = {**task.default_config, **overrides}
            need = task.smem_need(config, (shape,), ("float16",))
            assert used is None or used <= need, (row["task"], row["shape"], label, used, need)
            checked += used is not None
    assert checked >= 100


# -- stored configurations from before the variants -------------------------------------------
def test_a_configuration_stored_before_a_variant_existed_takes_its_first_value():
    """The seeds measured softmax, matmul and attention before these variants existed: their
    configurations lack the new names and mean the kernel as it was (the first value)."""
    for task, variant in ((SOFTMAX, "LONG_ROW_BLOCK"), (MATMUL, "PERSISTENT_TMA"),
                          (ATTENTION, "FLASH")):
        old = {k: v for k, v in task.default_config.items() if k != variant}
        assert task.complete(old) == task.default_config
    assert SOFTMAX.complete({"NUM_WARPS": 8}) is None  # knobs missing: not a whole point
    assert SOFTMAX.complete({**SOFTMAX.default_config, "BOGUS": 1}) is None
