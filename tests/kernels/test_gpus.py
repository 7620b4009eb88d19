"""The GPU facts table: device names as tools write them -> one known part, or None."""

from __future__ import annotations

import pytest

from kernelkb.kb.record import Environment
from kernelkb.kernels.shared import gpus


@pytest.mark.parametrize(("name", "canonical"), [
    ("NVIDIA A100-PCIE-40GB", "NVIDIA A100-PCIE-40GB"),
    ("nvidia a100-sxm4-40gb", "NVIDIA A100-SXM4-40GB"),
    ("NVIDIA A100 80GB PCIe", "NVIDIA A100 80GB PCIe"),
    ("A100-80GB", "NVIDIA A100-SXM4-80GB"),
    ("NVIDIA RTX A6000", "NVIDIA RTX A6000"),
    ("RTX A4000", "NVIDIA RTX A4000"),
    ("AMD Radeon PRO W6600", "AMD Radeon PRO W6600"),
    ("AMD Radeon Pro W7800", "AMD Radeon PRO W7800"),
    ("AMD Instinct MI250X / MI250", "AMD Instinct MI250X"),
    ("mi300x", "AMD Instinct MI300X"),
    ("gfx90a", "AMD Instinct MI250X"),
    ("gfx942", "AMD Instinct MI300X"),
    ("h200", "NVIDIA H200"),
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"),
    ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe"),
    ("NVIDIA B200", "NVIDIA B200"),
    ("NVIDIA H100 NVL", "NVIDIA H100 NVL"),  # not the H100 SXM
    ("Tesla V100-SXM2-16GB", "Tesla V100-SXM2-16GB"),
    ("Tesla T4", "Tesla T4"),
    ("sm_70", "Tesla V100-SXM2-16GB"),  # one family has it: its usual part
    ("sm_100", "NVIDIA B200"),
    ("NVIDIA L40S", "NVIDIA L40S"),
    ("NVIDIA GeForce RTX 3060", "NVIDIA GeForce RTX 3060"),
    ("GeForce RTX 4090", "NVIDIA GeForce RTX 4090"),
    ("rtx4070", "NVIDIA GeForce RTX 4070"),
])
def test_device_names_as_tools_write_them(name: str, canonical: str) -> None:
    facts = gpus.lookup(name)
    assert facts is not None and facts.name == canonical


@pytest.mark.parametrize("name", [
    "NVIDIA GeForce RTX 4090 Ti",  # another part: no silent match to the 4090
    "NVIDIA H100 SXM5 94GB",  # another part: not the 80 GB one nor the NVL
    "NVIDIA GeForce RTX 3060 Ti",  # neither the 3060 nor the 3060 Laptop
    "Tesla V100S-PCIE-32GB",  # another part: not the V100
    "Tesla P100-PCIE-16GB",
    "sm_90",  # H100 and H200 share it: an arch alone does not name the part
    "sm_86",
    "",
])
def test_unknown_or_ambiguous_names_give_none(name: str) -> None:
    assert gpus.lookup(name) is None


@pytest.mark.parametrize(("name", "canonical", "arch"), [
    # the parts of public Kernel Tuner data an import once refused, and cards a bootstrap
    # plan was asked for
    ("NVIDIA TITAN RTX", "NVIDIA TITAN RTX", "sm_75"),
    ("NVIDIA GeForce RTX 2080 Ti", "NVIDIA GeForce RTX 2080 Ti", "sm_75"),
    ("NVIDIA GeForce RTX 3060 Laptop GPU", "NVIDIA GeForce RTX 3060 Laptop GPU", "sm_86"),
    ("NVIDIA GeForce RTX 3060", "NVIDIA GeForce RTX 3060", "sm_86"),  # not the Laptop
    ("RTX 5090", "NVIDIA GeForce RTX 5090", "sm_120"),
    ("NVIDIA L4", "NVIDIA L4", "sm_89"),
    ("L40", "NVIDIA L40", "sm_89"),
    ("NVIDIA L40S", "NVIDIA L40S", "sm_89"),  # not the L40
    ("GH200", "NVIDIA GH200 480GB", "sm_90"),
])
def test_parts_beyond_the_first_table(name: str, canonical: str, arch: str) -> None:
    facts = gpus.lookup(name)
    assert facts is not None and (facts.name, facts.arch) == (canonical, arch)


def test_unknown_names_get_the_closest_part_and_the_known_list() -> None:
    assert gpus.closest("NVIDIA GeForce RTX 4090 Ti") == "NVIDIA GeForce RTX 4090"
    message = gpus.unknown_gpu_message("Tesla P100-PCIE-16GB")
    assert "'Tesla P100-PCIE-16GB'" in message and "closest" in message
    assert all(name in message for name in gpus.known_names())
    assert "NVIDIA H100 PCIe" in gpus.unknown_gpu_message("sm_90")


@pytest.mark.parametrize(("hint", "canonical"), [
    ("MI250X.json.gz", "AMD Instinct MI250X"),
    ("convolution_milo/W7800.json.gz", "AMD Radeon PRO W7800"),
    ("A100_T4.json.gz", "NVIDIA A100-SXM4-80GB"),  # a family name: the family's usual part
    ("results_rtx_4090_run2.json", "NVIDIA GeForce RTX 4090"),
    ("conv_T4_A6000.json", "NVIDIA RTX A6000"),  # T4 there is the results format, not the card
])
def test_a_file_name_hint_is_read_when_the_name_is_empty(hint: str, canonical: str) -> None:
    facts = gpus.lookup("", hint=hint)
    assert facts is not None and facts.name == canonical
    assert gpus.lookup("unknown device", hint=hint) is None  # a name wins over a hint
    assert gpus.lookup("", hint="T1_search_space.json") is None


def test_every_part_fills_a_valid_environment() -> None:
    names = set()
    for facts in gpus.TABLE:
        env = Environment(**facts.to_env_fields(), triton_version="none", torch_version="none")
        assert env.gpu_name == facts.name and env.vendor in ("nvidia", "amd")
        assert gpus.lookup(facts.name) == facts  # the canonical name finds itself
        assert facts.warp_size == (64 if facts.arch in ("gfx90a", "gfx942") else 32)
        assert facts.max_smem_per_block_kib <= facts.smem_per_sm_kib
        names.add(facts.name)
    assert len(names) == len(gpus.TABLE)
    assert {f.vendor for f in gpus.TABLE} == {"nvidia", "amd"}


# the rows of the two small tables the GPU table replaced (the sandbox's datasheet of
# GB/s and bf16 TFLOP/s by name fragment, kernels/resources.py's KiB per block by
# compute capability): every part they knew keeps its figures, under its whole name
@pytest.mark.parametrize(("name", "gbps", "tflops"), [
    ("NVIDIA H200", 4800, 989), ("NVIDIA GH200 480GB", 4000, 989),
    ("NVIDIA H100 PCIe", 2000, 756), ("NVIDIA H100 NVL", 3900, 835),
    ("NVIDIA H100 80GB HBM3", 3350, 989), ("NVIDIA H800", 3350, 989),
    ("NVIDIA H20", 4000, 148), ("NVIDIA B200", 8000, 2250),
    ("NVIDIA A100-SXM4-80GB", 2039, 312), ("NVIDIA A100 80GB PCIe", 1935, 312),
    ("NVIDIA A100-PCIE-40GB", 1555, 312), ("NVIDIA A10G", 600, 70),
    ("NVIDIA L40S", 864, 362), ("NVIDIA L4", 300, 121),
    ("Tesla V100-SXM2-16GB", 900, 125), ("Tesla T4", 320, 65),
])
def test_the_datasheet_ceilings_of_every_part_the_sandbox_knew(name: str, gbps: float,
                                                               tflops: float) -> None:
    assert gpus.datasheet(name) == (gbps, tflops)


def test_the_datasheet_reads_whole_names_only() -> None:
    assert gpus.datasheet("NVIDIA L40") == (864, 181)  # not the L4's row
    assert gpus.datasheet("NVIDIA GeForce RTX 4090") == (1008, 165.2)
    assert gpus.datasheet("NVIDIA GeForce RTX 4090 D") == (None, None)  # another part
    assert gpus.datasheet("") == (None, None)


@pytest.mark.parametrize(("gpu", "kib"), [
    ("sm_70", 96), ("sm_75", 64), ("sm_80", 163), ("sm_86", 99), ("sm_87", 163),
    ("sm_89", 99), ("sm_90", 227), ("sm_100", 227), ("sm_103", 227), ("sm_120", 99),
    ("NVIDIA H200", 227), ("NVIDIA GH200 480GB", 227), ("NVIDIA B200", 227),
    ("NVIDIA A100-SXM4-80GB", 163), ("NVIDIA L40", 99), ("NVIDIA GeForce RTX 4090", 99),
    ("Tesla V100-SXM2-16GB", 96), ("Tesla T4", 64), ("NVIDIA A10G", 99),
    # parts the table lacks, by the architecture their names imply
    ("NVIDIA A800-SXM4-80GB", 163), ("NVIDIA A40", 99), ("NVIDIA A10", 99),
    ("NVIDIA H100 SXM5 94GB", 227),
])
def test_shared_memory_per_block_by_part_or_architecture(gpu: str, kib: int) -> None:
    assert gpus.smem_per_block_kib(gpu) == kib


@pytest.mark.parametrize("gpu", ["cpu-interpreter", "cpu", "", "sm_61", "some unknown part"])
def test_no_shared_memory_figure_for_what_names_no_known_architecture(gpu: str) -> None:
    assert gpus.smem_per_block_kib(gpu) is None
