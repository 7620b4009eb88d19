"""The GPU facts table: device names as tools write them -> one known part, or None."""

from __future__ import annotations

import pytest

from kb import gpu_facts
from kb.record import Environment


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
    ("sm_100", "NVIDIA B200"),
    ("NVIDIA L40S", "NVIDIA L40S"),
    ("NVIDIA GeForce RTX 3060", "NVIDIA GeForce RTX 3060"),
    ("GeForce RTX 4090", "NVIDIA GeForce RTX 4090"),
    ("rtx4070", "NVIDIA GeForce RTX 4070"),
])
def test_device_names_as_tools_write_them(name: str, canonical: str) -> None:
    facts = gpu_facts.lookup(name)
    assert facts is not None and facts.name == canonical


@pytest.mark.parametrize("name", [
    "NVIDIA GeForce RTX 4090 Ti",  # another part: no silent match to the 4090
    "NVIDIA H100 NVL",
    "NVIDIA GeForce RTX 3060 Ti",  # neither the 3060 nor the 3060 Laptop
    "Tesla V100-SXM2-16GB",
    "sm_90",  # H100 and H200 share it: an arch alone does not name the part
    "sm_86",
    "",
])
def test_unknown_or_ambiguous_names_give_none(name: str) -> None:
    assert gpu_facts.lookup(name) is None


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
    facts = gpu_facts.lookup(name)
    assert facts is not None and (facts.name, facts.arch) == (canonical, arch)


def test_unknown_names_get_the_closest_part_and_the_known_list() -> None:
    assert gpu_facts.closest("NVIDIA GeForce RTX 4090 Ti") == "NVIDIA GeForce RTX 4090"
    message = gpu_facts.unknown_gpu_message("Tesla V100-SXM2-16GB")
    assert "'Tesla V100-SXM2-16GB'" in message and "closest" in message
    assert all(name in message for name in gpu_facts.known_names())
    assert "NVIDIA H100 PCIe" in gpu_facts.unknown_gpu_message("sm_90")


@pytest.mark.parametrize(("hint", "canonical"), [
    ("MI250X.json.gz", "AMD Instinct MI250X"),
    ("convolution_milo/W7800.json.gz", "AMD Radeon PRO W7800"),
    ("A100_T4.json.gz", "NVIDIA A100-SXM4-80GB"),  # a family name: the family's usual part
    ("results_rtx_4090_run2.json", "NVIDIA GeForce RTX 4090"),
])
def test_a_file_name_hint_is_read_when_the_name_is_empty(hint: str, canonical: str) -> None:
    facts = gpu_facts.lookup("", hint=hint)
    assert facts is not None and facts.name == canonical
    assert gpu_facts.lookup("unknown device", hint=hint) is None  # a name wins over a hint
    assert gpu_facts.lookup("", hint="T1_search_space.json") is None


def test_every_part_fills_a_valid_environment() -> None:
    names = set()
    for facts in gpu_facts.TABLE:
        env = Environment(**facts.to_env_fields(), triton_version="none", torch_version="none")
        assert env.gpu_name == facts.name and env.vendor in ("nvidia", "amd")
        assert gpu_facts.lookup(facts.name) == facts  # the canonical name finds itself
        assert facts.warp_size == (64 if facts.arch in ("gfx90a", "gfx942") else 32)
        assert facts.max_smem_per_block_kib <= facts.smem_per_sm_kib
        names.add(facts.name)
    assert len(names) == len(gpu_facts.TABLE)
    assert {f.vendor for f in gpu_facts.TABLE} == {"nvidia", "amd"}
