"""Transferable features on hand-made launches: each feature means what the docstring says."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from kernelkb.kernels.shared.launch import Launch
from kernelkb.retrieval.features import derive_features, raw_features
from kernelkb.retrieval.hardware import gpu_similarity
from kernelkb.retrieval.launch import kernel_tuner_launch, parse_problem_size

# a made-up NVIDIA-like part and an AMD-like one (wave64), facts only
NV = {"gpu_name": "nv", "vendor": "nvidia", "arch": "sm_80", "sm_count": 100,
      "mem_bandwidth_gbps": 1000.0, "smem_per_sm_kib": 128, "regs_per_sm": 65536,
      "max_threads_per_sm": 2048, "warp_size": 32, "l2_mib": 40, "peak_tflops": 100.0}
AMD = {**NV, "gpu_name": "amd", "vendor": "amd", "arch": "gfx90a", "warp_size": 64,
       "smem_per_sm_kib": 64}


def launch(**kw) -> Launch:
    base = {"programs": 1000, "threads_per_program": 256, "elements_per_program": 1024,
            "bytes_per_element": 2, "tile_bytes": 0}
    return Launch(**{**base, **kw})


def test_features_read_a_launch_or_any_object_with_its_attributes():
    """A user task's own launch type works by its attributes: the ones it lacks take
    Launch's defaults, and its features are those of the same Launch."""
    k = Launch(programs=3, threads_per_program=64, elements_per_program=8, bytes_per_element=2,
               tile_bytes=16, num_stages=2)
    assert Launch.of(k) is k
    own = SimpleNamespace(programs=3, threads_per_program=64, elements_per_program=8,
                          bytes_per_element=2, tile_bytes=16, num_stages=2, colour="red")
    assert Launch.of(own) == k
    assert derive_features(own, NV) == derive_features(k, NV)
    with pytest.raises(ValueError, match="launch needs programs"):
        Launch.of(SimpleNamespace(programs=0, threads_per_program=64, elements_per_program=8,
                                  bytes_per_element=2, tile_bytes=16))


def test_threads_warps_and_lane_use_follow_the_warp_size():
    nv = derive_features(launch(threads_per_program=48), NV)
    amd = derive_features(launch(threads_per_program=48), AMD)
    assert nv["threads"] == amd["threads"] == 48
    assert (nv["warps"], amd["warps"]) == (2, 1)
    assert nv["lane_use"] == pytest.approx(48 / 64) and amd["lane_use"] == pytest.approx(48 / 64)
    assert derive_features(launch(threads_per_program=256), AMD)["warps"] == 4


def test_work_per_thread_and_program_size():
    f = derive_features(launch(elements_per_program=4096, threads_per_program=128), NV)
    assert f["work_per_thread"] == 32
    assert f["log2_elements_per_program"] == 12 and f["log2_bytes_per_program"] == 13


def test_occupancy_from_thread_register_and_smem_limits():
    # 256 threads, 24 registers each: the 2048-thread limit allows 8 programs = 64 warps
    free = derive_features(launch(), NV)
    assert free["resident_programs"] == 8 and free["occupancy"] == 1.0
    # 48 KiB of shared memory per program: 128 KiB holds 2
    smem = derive_features(launch(smem_bytes=48 * 1024, tile_bytes=48 * 1024), NV)
    assert smem["resident_programs"] == 2 and smem["occupancy"] == pytest.approx(16 / 64)
    assert smem["smem_share"] == pytest.approx(48 / 128)
    # a register tile of 256 KiB over 256 threads: 256 words + 24 each, past the limit
    regs = derive_features(launch(tile_bytes=256 * 1024), NV)
    assert regs["regs_per_thread"] == 24 + 256 and regs["spill_risk"] > 1
    assert regs["resident_programs"] == 1  # 65536 / (255 x 256)


def test_waves_tail_and_persistent_cap():
    f = derive_features(launch(programs=1000), NV)  # 100 SMs x 8 resident = 800 slots
    assert f["waves"] == pytest.approx(1.25) and f["wave_efficiency"] == pytest.approx(0.625)
    assert f["programs_per_sm"] == 10
    capped = derive_features(launch(programs=100_000, programs_per_sm_cap=4), NV)
    assert capped["programs_per_sm"] == 4


def test_memory_or_compute_bound_against_the_machine_balance():
    # balance: 100 TFLOP/s / 1000 GB/s = 100 flop per byte
    mem = derive_features(launch(), NV, bytes_moved=1e8, flops=1e9)  # 10 flop per byte
    assert mem["intensity_vs_balance"] == pytest.approx(math.log2(0.1))
    assert mem["memory_bound"] == 1.0
    comp = derive_features(launch(), NV, bytes_moved=1e6, flops=1e9)
    assert comp["memory_bound"] == 0.0
    unknown = derive_features(launch(), NV)
    assert math.isnan(unknown["intensity_vs_balance"]) and math.isnan(unknown["memory_bound"])


def test_vector_stages_and_gpu_facts():
    f = derive_features(launch(vector_width=8, num_stages=3, unroll=4), NV)
    assert (f["vector_width"], f["vector_bytes"], f["num_stages"], f["unroll"]) == (8, 16, 3, 4)
    assert f["gpu.sm_count"] == 100 and f["gpu.registers_per_sm"] == 65536
    assert f["gpu.warp_size"] == 32 and f["gpu.vendor_nvidia"] == 1.0
    assert derive_features(launch(), AMD)["gpu.vendor_nvidia"] == 0.0


def test_missing_facts_are_nan_not_guesses():
    f = derive_features(launch(), {"gpu_name": "unknown"})
    assert math.isnan(f["occupancy"]) and math.isnan(f["waves"]) and math.isnan(f["gpu.l2_mib"])
    assert f["threads"] == 256  # launch facts still stand


def test_raw_features_are_namespaced_by_op():
    raw = raw_features("convolution", {"block_size_x": 32, "use_shmem": True, "algo": "exp"})
    assert raw["convolution.block_size_x"] == 32 and raw["convolution.use_shmem"] == 1.0
    assert raw["convolution.algo"] == raw_features("x", {"algo": "exp"})["x.algo"]


def test_kernel_tuner_launch_by_convention():
    params = {"block_size_x": 32, "block_size_y": 4, "tile_size_x": 2, "tile_size_y": 2,
              "use_shmem": 1, "loop_unroll_factor_channel": 0}
    ln = kernel_tuner_launch(params, parse_problem_size("problem_size=4096x4096"))
    assert ln.programs == (4096 // 64) * (4096 // 8)
    assert ln.threads_per_program == 128 and ln.elements_per_program == 512
    assert ln.smem_bytes == ln.tile_bytes == 512 * 4 and ln.unroll == 1
    assert kernel_tuner_launch({**params, "use_shmem": 0}, (4096, 4096)).smem_bytes == 0
    # no tuned block size: Kernel Tuner's default 256-thread block
    assert kernel_tuner_launch({"tile_size_x": 4}, (1024,)).threads_per_program == 256
    with pytest.raises(ValueError):
        parse_problem_size("rows=4,cols=5")


def test_gpu_similarity_uses_facts_not_names():
    a100 = {**NV, "gpu_name": "A", "mem_bandwidth_gbps": 1555, "sm_count": 108}
    a6000 = {**NV, "gpu_name": "B", "arch": "sm_86", "mem_bandwidth_gbps": 768, "sm_count": 84}
    mi = {**AMD, "gpu_name": "C"}
    assert gpu_similarity(a100, a100) == 1.0
    assert gpu_similarity(a100, a6000) > gpu_similarity(a100, mi)
    assert gpu_similarity(a100, {**a6000, "gpu_name": "renamed"}) == gpu_similarity(a100, a6000)


def test_facts_past_any_device_give_no_feature_not_an_error() -> None:
    """A GPU whose facts overflow the balance (peak 1e300 TFLOPS, 5e-324 GB/s) has no
    memory-bound class; it does not fail the feature table (and with it /bootstrap)."""
    from kernelkb.retrieval.features import shape_features

    for facts in ({"peak_tflops": 1e300, "mem_bandwidth_gbps": 4800.0},
                  {"peak_tflops": 989.0, "mem_bandwidth_gbps": 5e-324}):
        features = shape_features(facts, bytes_moved=1e9, flops=1e12)
        assert math.isnan(features["intensity_vs_balance"])
        assert math.isnan(features["memory_bound"])


def test_clblast_gemm_knobs_are_read_as_tiles_threads_and_vectors():
    """CLBlast's GEMM vocabulary (MWG/NWG outputs, MDIMC/NDIMC threads, VWM/VWN, KWI,
    SA/SB) maps onto the launch features, not onto Kernel Tuner's 256-thread default."""
    params = {"MWG": 64, "NWG": 128, "KWG": 32, "MDIMC": 16, "NDIMC": 8, "VWM": 2,
              "VWN": 4, "KWI": 2, "SA": 1, "SB": 0, "STRM": 0}
    ln = kernel_tuner_launch(params, (4096, 4096, 4096))
    assert (ln.programs, ln.threads_per_program, ln.elements_per_program) == \
        (64 * 32, 128, 64 * 128)
    assert (ln.vector_width, ln.unroll, ln.smem_bytes) == (4, 2, 64 * 32 * 4)
    direct = kernel_tuner_launch({"WGD": 32, "MDIMCD": 8, "NDIMCD": 8, "VWMD": 1,
                                  "VWND": 2, "KWID": 2}, (1000, 1000, 1000))
    assert (direct.programs, direct.threads_per_program, direct.smem_bytes) == \
        (32 * 32, 64, (32 + 32) * 32 * 4)


def test_a_kernel_with_its_own_names_for_threads_and_work_is_read_by_them():
    ln = kernel_tuner_launch({"nthreads": 32, "items_per_thread": 4}, (1 << 24,))
    assert (ln.threads_per_program, ln.elements_per_program) == (32, 128)
    assert ln.programs == (1 << 24) // 128
    two = kernel_tuner_launch({"threads_per_block": 128, "use_shmem": 1, "vector": 4},
                              (4096, 4096))
    assert two.threads_per_program == 128 and two.smem_bytes == 512 and two.vector_width == 4
    # names it cannot read keep Kernel Tuner's default block; block_size_x still wins
    assert kernel_tuner_launch({"foo": 3}, (4096,)).threads_per_program == 256
    assert kernel_tuner_launch({"block_size_x": 64, "nthreads": 32},
                               (4096,)).threads_per_program == 64
