"""The ranker carries matmul's small-M knobs: the candidate space holds the one-launch
split-K points, and their features say what they cost (kernels launched, programs that
share a reduction) in terms that transfer, beside the raw knob values."""

from __future__ import annotations

from types import SimpleNamespace

from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.spaces import task_space
from kernelkb.retrieval.features import derive_features, raw_features

MATMUL = get_task("matmul")
H200 = {"gpu_name": "NVIDIA H200", "arch": "sm_90", "sm_count": 132,
        "mem_bandwidth_gbps": 4800.0, "smem_per_sm_kib": 228, "peak_tflops": 989.0}
DECODE = "M=16,N=4096,K=4096"
POINT = {**MATMUL.default_config, "BLOCK_M": 16, "NUM_STAGES": 4, "SPLIT_K": 8,
         "SPLIT_REDUCE": "atomic"}
SUMMED = {**POINT, "SPLIT_K": 4, "SPLIT_REDUCE": "kernel"}


def test_the_space_offers_the_atomic_points_with_their_costs():
    space = task_space(MATMUL)
    assert POINT in space.configs and SUMMED in space.configs
    atomic = derive_features(space.launch_of_config(POINT, DECODE), H200)
    summed = derive_features(space.launch_of_config(SUMMED, DECODE), H200)
    plain = derive_features(space.launch_of_config(MATMUL.default_config, DECODE), H200)
    assert (atomic["launches"], summed["launches"], plain["launches"]) == (1, 2, 1)
    assert (atomic["log2_reduction_splits"], summed["log2_reduction_splits"]) == (3, 2)
    assert plain["log2_reduction_splits"] == 0
    assert atomic["programs_per_sm"] > 1 > plain["programs_per_sm"]  # more programs than SMs
    assert raw_features("matmul", POINT)["matmul.SPLIT_REDUCE"] != \
        raw_features("matmul", SUMMED)["matmul.SPLIT_REDUCE"]


def test_a_record_from_before_the_reduction_knob_reads_as_the_summing_kernel():
    space = task_space(MATMUL)
    old = {k: v for k, v in SUMMED.items() if k != "SPLIT_REDUCE"}
    assert space.config_of_record(old) == SUMMED
    record = SimpleNamespace(task=SimpleNamespace(task_id="matmul", dtype="float16"),
                             edit=SimpleNamespace(config=old))
    launch = space.launch_of_record(record, DECODE)
    assert (launch.launches, launch.reduction_splits) == (2, 4)
