"""Public spec facts of the GPUs that tuning data comes from, looked up by device name.

Why: experience transfers between GPUs by what the parts are (SM count, bandwidth,
shared memory per SM, registers), not by what they are called. Importers fill an
experience's hardware fingerprint from this table; retrieval and the optimizer read it
to compare GPUs; the sandbox takes its fallback roofline ceilings from it (``datasheet``)
and the tasks the shared memory one block may use (``smem_per_block_kib``, behind
kernels/resources.py's ``smem_limit``). One table for all of them, in the standard library
only: kernels/shared is the floor every layer stands on.

Figures are vendor datasheet / whitepaper values, written here by hand:

- ``peak_tensor_tflops`` is the dense fp16/bf16 matrix-multiply peak with fp32
  accumulation (what a Triton matmul uses), the convention of ``Environment.peak_tflops``
  (989 on the H200). GeForce cards run fp32-accumulate at half their fp16-accumulate
  rate, so theirs are half the headline figure; the RDNA2 W6600 has no matrix units and
  its figure is packed fp16 math.
- ``smem_per_sm_kib`` is the shared memory (LDS) one SM / CU can give its blocks;
  ``max_smem_per_block_kib`` the most one block may opt into.
- AMD counts are per CU. RDNA parts pair CUs into WGPs that share 128 KiB of LDS; in CU
  mode one CU uses 64 KiB. ``max_threads_per_sm`` on RDNA is 32 waves of 32, as
  rocminfo reports it.
- An MI250X package is two GCDs that software sees as two devices; a kernel runs on one,
  so the row is one GCD (110 CUs, 1.6 TB/s, 64 GB), half the package's datasheet figures.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from kernelkb.kernels.shared.errors import quoted


@dataclass(frozen=True)
class GpuFacts:
    name: str  # canonical: the name the vendor's tools print (nvidia-smi, rocm-smi)
    vendor: str  # "nvidia" or "amd"
    arch: str  # sm_80, gfx90a, ...
    family: str  # parts that differ only in memory or form factor share a family
    sm_count: int  # SMs (NVIDIA) or CUs (AMD)
    mem_bandwidth_gbps: float
    memory_gib: float
    smem_per_sm_kib: int
    max_smem_per_block_kib: int
    regs_per_sm: int  # 32-bit registers per SM / CU
    max_threads_per_sm: int
    warp_size: int  # 32, or 64 for a CDNA wavefront
    l2_mib: float
    boost_clock_mhz: int | None
    peak_fp32_tflops: float
    peak_tensor_tflops: float  # see the module docstring
    aliases: tuple[str, ...] = ()
    family_default: bool = False  # the part a name without memory / form factor means
    note: str = ""
    keys: tuple[frozenset[str], ...] = field(default=(), compare=False, repr=False)

    def to_env_fields(self) -> dict[str, Any]:
        """The ``Environment`` fields this table knows (versions come from the caller)."""
        return {
            "gpu_name": self.name,
            "arch": self.arch,
            "vendor": self.vendor,
            "sm_count": self.sm_count,
            "mem_bandwidth_gbps": self.mem_bandwidth_gbps,
            "smem_per_sm_kib": self.smem_per_sm_kib,
            "peak_tflops": self.peak_tensor_tflops,
        }

    def facts(self) -> dict[str, Any]:
        """Every fact as one flat dict, for similarity and the ranker's features: the
        Environment's fields plus the rest of the table (registers, threads, warp size,
        L2, ...); the name-matching fields (aliases, keys) and notes are left out."""
        skip = ("name", "aliases", "keys", "note", "family_default", "peak_tensor_tflops")
        out = {k: v for k, v in vars(self).items() if k not in skip}
        return {**out, **self.to_env_fields()}


# what follows from the architecture alone (CUDA's compute capability tables, AMD's ISA
# guides): shared memory per SM and per block (KiB), 32-bit registers and threads per SM,
# warp or wavefront width; and the architecture's name
_ARCHITECTURES: dict[str, tuple[str, str, int, int, int, int, int]] = {
    "sm_70": ("Volta", "nvidia", 96, 96, 65536, 2048, 32),
    "sm_75": ("Turing", "nvidia", 64, 64, 65536, 1024, 32),
    "sm_80": ("Ampere", "nvidia", 164, 163, 65536, 2048, 32),
    "sm_86": ("Ampere", "nvidia", 100, 99, 65536, 1536, 32),
    "sm_87": ("Ampere", "nvidia", 164, 163, 65536, 1536, 32),  # Jetson Orin
    "sm_89": ("Ada", "nvidia", 100, 99, 65536, 1536, 32),
    "sm_90": ("Hopper", "nvidia", 228, 227, 65536, 2048, 32),
    "sm_100": ("Blackwell", "nvidia", 228, 227, 65536, 2048, 32),
    "sm_103": ("Blackwell", "nvidia", 228, 227, 65536, 2048, 32),  # B300, GB300
    "sm_120": ("Blackwell", "nvidia", 128, 99, 65536, 1536, 32),
    "gfx908": ("CDNA", "amd", 64, 64, 131072, 2048, 64),
    "gfx90a": ("CDNA2", "amd", 64, 64, 131072, 2048, 64),
    "gfx942": ("CDNA3", "amd", 64, 64, 131072, 2048, 64),
    "gfx950": ("CDNA4", "amd", 160, 160, 131072, 2048, 64),
    "gfx1030": ("RDNA2", "amd", 64, 64, 65536, 1024, 32),
    "gfx1032": ("RDNA2", "amd", 64, 64, 65536, 1024, 32),
    "gfx1100": ("RDNA3", "amd", 64, 64, 98304, 1024, 32),
}
_FAMILY_FACTS = ("smem_per_sm_kib", "max_smem_per_block_kib", "regs_per_sm",
                 "max_threads_per_sm", "warp_size")
# what a part's datasheet says and its architecture does not: left unknown for a family
PART_FACTS = ("sm_count", "mem_bandwidth_gbps", "memory_gib", "l2_mib", "boost_clock_mhz",
              "peak_fp32_tflops", "peak_tflops")


def _nvidia(name: str, arch: str, family: str, sms: int, gbps: float, mem: float,
            l2: float, mhz: int | None, fp32: float, tensor: float, *aliases: str,
            default: bool = False, note: str = "") -> GpuFacts:
    _, _, smem, block, regs, threads, warp = _ARCHITECTURES[arch]
    return GpuFacts(name, "nvidia", arch, family, sms, gbps, mem, smem, block, regs, threads,
                    warp, l2, mhz, fp32, tensor, aliases, default, note)


def _amd(name: str, arch: str, family: str, cus: int, gbps: float, mem: float, regs: int,
         threads: int, wave: int, l2: float, mhz: int, fp32: float, tensor: float,
         *aliases: str, note: str = "") -> GpuFacts:
    return GpuFacts(name, "amd", arch, family, cus, gbps, mem, 64, 64, regs, threads, wave,
                    l2, mhz, fp32, tensor, aliases, True, note)


def _rtx(number: str) -> tuple[str, ...]:
    return (f"RTX {number}", f"RTX{number}")


_TABLE: tuple[GpuFacts, ...] = (
    # A100 (GA100): 108 SMs, 40 MiB L2, 1410 MHz; only memory and bandwidth differ
    _nvidia("NVIDIA A100-PCIE-40GB", "sm_80", "A100", 108, 1555, 40, 40, 1410, 19.5, 312,
            "A100-PCIE-40GB", "A100 PCIe 40GB", "A100 PCIe", "A100 40GB"),
    _nvidia("NVIDIA A100-SXM4-40GB", "sm_80", "A100", 108, 1555, 40, 40, 1410, 19.5, 312,
            "A100-SXM4-40GB", "A100 SXM 40GB"),
    _nvidia("NVIDIA A100 80GB PCIe", "sm_80", "A100", 108, 1935, 80, 40, 1410, 19.5, 312,
            "A100 80GB PCIe"),
    _nvidia("NVIDIA A100-SXM4-80GB", "sm_80", "A100", 108, 2039, 80, 40, 1410, 19.5, 312,
            "A100-SXM4-80GB", "A100 SXM 80GB", "A100 SXM4", "A100 SXM", "A100-80GB", "A100",
            default=True),
    # Hopper (GH100)
    _nvidia("NVIDIA H100 PCIe", "sm_90", "H100", 114, 2000, 80, 50, 1755, 51.2, 756,
            "H100 PCIe", "H100 PCIe 80GB"),
    _nvidia("NVIDIA H100 80GB HBM3", "sm_90", "H100", 132, 3350, 80, 50, 1980, 67, 989,
            "H100 SXM", "H100 SXM5", "H100 SXM5 80GB", "H100", default=True),
    _nvidia("NVIDIA H100 NVL", "sm_90", "H100", 132, 3900, 94, 50, 1785, 60, 835,
            "H100 NVL", "H100 NVL 94GB", note="a PCIe card, NVLink-bridged in pairs"),
    _nvidia("NVIDIA H200", "sm_90", "H200", 132, 4800, 141, 50, 1980, 67, 989,
            "H200", "H200 SXM", "H200 141GB", "H200 SXM 141GB", default=True),
    _nvidia("NVIDIA H200 NVL", "sm_90", "H200", 132, 4800, 141, 50, None, 60, 835,
            "H200 NVL", note="a PCIe card, NVLink-bridged; no boost clock published"),
    _nvidia("NVIDIA GH200 480GB", "sm_90", "GH200", 132, 4000, 96, 50, 1980, 67, 989,
            "GH200", "GH200 480GB", "GH200 Grace Hopper", default=True,
            note="the HBM3 part (96 GB); the 144 GB HBM3e part moves 4.9 TB/s"),
    # Hopper for export: the H800 has less NVLink and FP64 than the H100, the H20 far less
    # tensor math (a quarter of an SM's) and fewer SMs
    _nvidia("NVIDIA H800", "sm_90", "H800", 132, 3350, 80, 50, 1980, 67, 989,
            "H800", "H800 SXM", "H800 SXM5", "H800 80GB HBM3", default=True),
    _nvidia("NVIDIA H800 PCIe", "sm_90", "H800", 114, 2000, 80, 50, 1755, 51, 756,
            "H800 PCIe"),
    _nvidia("NVIDIA H20", "sm_90", "H20", 78, 4000, 96, 60, None, 44, 148, "H20",
            default=True, note="SM count as the device reports it (the datasheet gives "
            "none); no boost clock published"),
    # Blackwell (GB100)
    _nvidia("NVIDIA B200", "sm_100", "B200", 148, 8000, 180, 126, None, 80, 2250,
            "B200", "B200 SXM", "B200 180GB", default=True,
            note="no boost clock published; fp32 peak and L2 approximate"),
    # Blackwell consumer (GB20x)
    _nvidia("NVIDIA GeForce RTX 5090", "sm_120", "RTX 5090", 170, 1792, 32, 96, 2407, 104.8,
            209.5, *_rtx("5090"), default=True),
    # Ada (AD10x)
    _nvidia("NVIDIA L4", "sm_89", "L4", 58, 300, 24, 48, 2040, 30.3, 121, "L4", "Tesla L4",
            default=True),
    _nvidia("NVIDIA L40", "sm_89", "L40", 142, 864, 48, 96, 2490, 90.5, 181, "L40",
            default=True),
    _nvidia("NVIDIA L40S", "sm_89", "L40S", 142, 864, 48, 96, 2520, 91.6, 362,
            "L40S", default=True),
    _nvidia("NVIDIA GeForce RTX 4060", "sm_89", "RTX 4060", 24, 272, 8, 24, 2460, 15.1, 30.2,
            *_rtx("4060"), default=True),
    _nvidia("NVIDIA GeForce RTX 4070", "sm_89", "RTX 4070", 46, 504, 12, 36, 2475, 29.1, 58.3,
            *_rtx("4070"), default=True),
    _nvidia("NVIDIA GeForce RTX 4080", "sm_89", "RTX 4080", 76, 716.8, 16, 64, 2505, 48.7,
            97.5, *_rtx("4080"), default=True),
    _nvidia("NVIDIA GeForce RTX 4090", "sm_89", "RTX 4090", 128, 1008, 24, 72, 2520, 82.6,
            165.2, *_rtx("4090"), default=True),
    # Ampere consumer and workstation (GA10x)
    _nvidia("NVIDIA GeForce RTX 3060", "sm_86", "RTX 3060", 28, 360, 12, 3, 1777, 12.7, 25.5,
            *_rtx("3060"), default=True),
    _nvidia("NVIDIA GeForce RTX 3070", "sm_86", "RTX 3070", 46, 448, 8, 4, 1725, 20.3, 40.6,
            *_rtx("3070"), default=True),
    _nvidia("NVIDIA GeForce RTX 3080", "sm_86", "RTX 3080", 68, 760, 10, 5, 1710, 29.8, 59.5,
            *_rtx("3080"), "RTX 3080 10GB", default=True),
    _nvidia("NVIDIA GeForce RTX 3090", "sm_86", "RTX 3090", 82, 936, 24, 6, 1695, 35.6, 71,
            *_rtx("3090"), default=True),
    _nvidia("NVIDIA RTX A4000", "sm_86", "RTX A4000", 48, 448, 16, 4, 1560, 19.2, 76.7,
            "RTX A4000", "A4000", default=True),
    _nvidia("NVIDIA RTX A6000", "sm_86", "RTX A6000", 84, 768, 48, 6, 1800, 38.7, 154.8,
            "RTX A6000", "A6000", default=True),
    _nvidia("NVIDIA A10G", "sm_86", "A10G", 80, 600, 24, 6, 1710, 35, 70, "A10G",
            default=True, note="AWS's variant of the A10 (G5 instances): no NVIDIA datasheet; "
            "fp32-accumulate tensor math at half rate, as on GeForce"),
    _nvidia("NVIDIA GeForce RTX 3060 Laptop GPU", "sm_86", "RTX 3060 Laptop", 30, 336, 6, 3,
            1703, 10.9, 21.8, "RTX 3060 Laptop", "RTX 3060 Laptop GPU", default=True,
            note="clocks and so the peaks depend on the laptop's power limit"),
    # Turing (TU10x)
    _nvidia("NVIDIA GeForce RTX 2080 Ti", "sm_75", "RTX 2080 Ti", 68, 616, 11, 5.5, 1545,
            13.4, 53.8, "RTX 2080 Ti", "RTX2080Ti", "2080 Ti", default=True),
    _nvidia("NVIDIA GeForce RTX 2080", "sm_75", "RTX 2080", 46, 448, 8, 4, 1710, 10.1, 40.3,
            *_rtx("2080"), default=True),
    _nvidia("NVIDIA TITAN RTX", "sm_75", "TITAN RTX", 72, 672, 24, 6, 1770, 16.3, 130.5,
            "TITAN RTX", "Titan RTX", default=True),
    _nvidia("Tesla T4", "sm_75", "T4", 40, 320, 16, 4, 1590, 8.1, 65, "NVIDIA T4", "T4",
            default=True),
    # Volta (GV100): SXM2 and PCIe differ in clocks, so in their peaks
    _nvidia("Tesla V100-SXM2-16GB", "sm_70", "V100", 80, 900, 16, 6, 1530, 15.7, 125,
            "V100-SXM2-16GB", "V100 SXM2", "V100", default=True),
    _nvidia("Tesla V100-SXM2-32GB", "sm_70", "V100", 80, 900, 32, 6, 1530, 15.7, 125,
            "V100-SXM2-32GB"),
    _nvidia("Tesla V100-PCIE-16GB", "sm_70", "V100", 80, 900, 16, 6, 1380, 14, 112,
            "V100-PCIE-16GB", "V100 PCIe"),
    _nvidia("Tesla V100-PCIE-32GB", "sm_70", "V100", 80, 900, 32, 6, 1380, 14, 112,
            "V100-PCIE-32GB"),
    # AMD CDNA (wave64): 512 KiB of vector registers per CU
    _amd("AMD Instinct MI250X", "gfx90a", "MI250X", 110, 1638.4, 64, 131072, 2048, 64, 8,
         1700, 23.9, 191.5, "MI250X", "Instinct MI250X",
         note="one GCD of the two in a package"),
    _amd("AMD Instinct MI300X", "gfx942", "MI300X", 304, 5300, 192, 131072, 2048, 64, 32,
         2100, 81.7, 1307.4, "MI300X", "Instinct MI300X",
         note="L2 is 4 MiB per XCD; the 256 MiB Infinity Cache is not counted"),
    # AMD RDNA (wave32 under HIP): two SIMD32 per CU
    _amd("AMD Radeon PRO W6600", "gfx1032", "W6600", 28, 224, 8, 65536, 1024, 32, 2, 2903,
         10.4, 20.9, "Radeon PRO W6600", "W6600",
         note="no matrix units: the fp16 figure is packed math; 32 MiB Infinity Cache"),
    _amd("AMD Radeon PRO W7800", "gfx1100", "W7800", 70, 576, 32, 98304, 1024, 32, 6, 2499,
         45.2, 90.5, "Radeon PRO W7800", "W7800",
         note="fp16 via WMMA; 64 MiB Infinity Cache"),
)

# Words that name the vendor or product line, not the part: "NVIDIA GeForce RTX 3090"
# and "RTX 3090" are one GPU. "Ti", "SUPER", "NVL", "Laptop" are NOT dropped: those are
# other parts, and a wrong match is worse than none.
_NOISE = frozenset({"nvidia", "amd", "geforce", "tesla", "instinct", "radeon", "pro", "tm",
                    "r", "corporation", "ati"})
_ARCH = re.compile(r"^(?:sm_?(\d+)[a-z]?|(gfx[0-9a-f]+))$")
_DATA_SUFFIXES = (".json.gz", ".json", ".gz", ".csv", ".jsonl")
# words of a file name that name a data format, not a card: "T4" is the results format
# of the tuning benchmarks (kb/importers/t4.py), as in A100_T4.json.gz or
# conv_T4_A6000.json, never the Tesla T4
_FORMAT_WORDS = frozenset({"t4"})


def _tokens(text: str) -> frozenset[str]:
    words = re.split(r"[^0-9a-z]+", text.lower())
    return frozenset(w for w in words if w and w not in _NOISE)


def _build_index() -> tuple[dict[frozenset[str], GpuFacts], tuple[GpuFacts, ...]]:
    """Alias token sets -> part; checked at import, so two parts never share a name."""
    index: dict[frozenset[str], GpuFacts] = {}
    table = []
    for facts in _TABLE:
        keys = tuple(dict.fromkeys(_tokens(a) for a in (facts.name, *facts.aliases)))
        facts = GpuFacts(**{**facts.__dict__, "keys": keys})
        table.append(facts)
        for key in keys:
            other = index.setdefault(key, facts)
            if other.name != facts.name:
                raise ValueError(f"alias {sorted(key)} names {other.name} and {facts.name}")
    return index, tuple(table)


_BY_KEY, TABLE = _build_index()


def known_names() -> list[str]:
    return [f.name for f in TABLE]


def _by_arch(arch: str) -> GpuFacts | None:
    """An arch names a part only when one family has it (gfx90a: MI250X; sm_90: H100 or
    H200, so no answer)."""
    families = {f.family for f in TABLE if f.arch == arch}
    if len(families) != 1:
        return None
    return next(f for f in TABLE if f.arch == arch and f.family_default)


def _match(name: str) -> GpuFacts | None:
    text = name.strip().lower()
    arch = _ARCH.match(text)
    if arch:
        return _by_arch(f"sm_{arch.group(1)}" if arch.group(1) else arch.group(2))
    for part in text.split("/"):  # ROCm writes "AMD Instinct MI250X / MI250"
        found = _BY_KEY.get(_tokens(part))
        if found is not None:
            return found
    return None


def _from_hint(hint: str) -> GpuFacts | None:
    """A file name such as MI250X.json.gz or results_A100_T4.json: the longest run of its
    words that names a part, leftmost first."""
    stem = PurePath(hint).name
    for suffix in _DATA_SUFFIXES:
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    words = [w for w in re.split(r"[^0-9A-Za-z]+", stem) if w and w.lower() not in _FORMAT_WORDS]
    for size in range(len(words), 0, -1):
        for start in range(len(words) - size + 1):
            found = _match(" ".join(words[start : start + size]))
            if found is not None:
                return found
    return None


def lookup(name: str | None, hint: str | None = None) -> GpuFacts | None:
    """Facts for a device name as tools write it ("NVIDIA A100-PCIE-40GB", "AMD Radeon PRO
    W6600", "gfx90a", "h200"); ``hint`` (e.g. a file name) is read only when the name is
    empty. None when unknown: callers say so, with ``closest`` and ``known_names``."""
    if name and name.strip():
        return _match(name)
    if hint:
        return _from_hint(hint)
    return None


def closest(name: str) -> str | None:
    """The known part whose name or an alias reads most like ``name`` (for messages)."""
    wanted = name.strip().lower()
    scored = [(difflib.SequenceMatcher(None, wanted, alias.lower()).ratio(), facts.name)
              for facts in TABLE for alias in (facts.name, *facts.aliases)]
    score, best = max(scored)
    return best if score >= 0.4 else None


def unknown_gpu_message(name: str) -> str:
    """The one sentence every caller prints for a name the table does not know."""
    arch = _ARCH.match(name.strip().lower())
    if arch:
        wanted = f"sm_{arch.group(1)}" if arch.group(1) else arch.group(2)
        parts = [f.name for f in TABLE if f.arch == wanted]
        near = f"; {wanted} is {', '.join(parts)}: name the part" if parts else ""
    else:
        found = closest(name) if name.strip() else None
        near = f"; closest: {found!r}" if found else ""
    return (f"unknown GPU {quoted(name)}{near}; known: {', '.join(known_names())}. "
            "Name one of them (e.g. --gpu) or add the part to kernels/shared/gpus.py")


@dataclass(frozen=True)
class UnknownPart:
    """A device the table does not know, taken as its tools wrote it: its architecture
    from the name where the name says it (``arch_from_name``), no other facts. Its
    measurements are kept; similarity and the ranker cannot place it among the others."""

    name: str
    arch: str
    vendor: str | None

    def to_env_fields(self) -> dict[str, Any]:
        return {"gpu_name": self.name, "arch": self.arch, "vendor": self.vendor}


# product-line patterns -> architecture, for names the table lacks (first match wins)
_ARCH_PATTERNS: tuple[tuple[str, str, str], ...] = (
    (r"rtx\s*50\d\d|rtx pro \d{4} blackwell", "sm_120", "nvidia"),
    (r"\bg?b[12]00\b", "sm_100", "nvidia"),
    (r"\bg?h(100|200|800|20)\b", "sm_90", "nvidia"),
    (r"rtx\s*40\d\d|\bl4\b|\bl40s?\b|rtx \d{4} ada", "sm_89", "nvidia"),
    (r"rtx\s*30\d\d|\ba(10g?|16|2|40)\b|rtx a\d{4}", "sm_86", "nvidia"),
    (r"\ba(100|800|30)\b", "sm_80", "nvidia"),
    (r"rtx\s*20\d\d|gtx\s*16\d\d|titan rtx|quadro rtx|\bt4\b", "sm_75", "nvidia"),
    (r"v100|titan v\b", "sm_70", "nvidia"),
    (r"mi35\d", "gfx950", "amd"),
    (r"mi3\d\d", "gfx942", "amd"),
    (r"mi2[15]0", "gfx90a", "amd"),
    (r"mi100", "gfx908", "amd"),
)


def arch_from_name(name: str) -> tuple[str, str | None]:
    """(architecture, vendor) a device name implies, or ("unknown", vendor or None)."""
    text = name.lower()
    for pattern, arch, vendor in _ARCH_PATTERNS:
        if re.search(pattern, text):
            return arch, vendor
    named = "nvidia" if "nvidia" in text or "geforce" in text else \
        "amd" if "amd" in text or "radeon" in text else None
    return "unknown", named


def family_facts(name: str) -> dict[str, Any] | None:
    """For a part the table lacks: the facts its architecture fixes, from the name
    ("NVIDIA GeForce RTX 4070 Ti SUPER" is Ada, sm_89; "sm_90" is Hopper), with
    ``facts_from`` saying so and ``unknown_facts`` naming what only its datasheet would
    give. None where the name implies no architecture we know."""
    text = name.strip().lower()
    direct = _ARCH.match(text)
    arch = (f"sm_{direct.group(1)}" if direct.group(1) else direct.group(2)) if direct \
        else arch_from_name(name)[0]
    if arch not in _ARCHITECTURES:
        return None
    family, vendor, *values = _ARCHITECTURES[arch]
    return {"gpu_name": name.strip(), "arch": arch, "vendor": vendor,
            **dict(zip(_FAMILY_FACTS, values, strict=True)),
            "facts_from": f"its architecture ({family}, {arch}): not in the facts table",
            "unknown_facts": ", ".join(PART_FACTS)}


def datasheet(gpu_name: str) -> tuple[float | None, float | None]:
    """(memory GB/s, dense bf16 TFLOP/s) of a part as its tools name it, the ceilings
    "share of peak" falls back to when none were measured; (None, None) for a name the
    table does not know (an L40 is not an L4, a GH200 not an H200: whole names match)."""
    found = lookup(gpu_name)
    if found is None:
        return None, None
    return float(found.mem_bandwidth_gbps), float(found.peak_tensor_tflops)


def smem_per_block_kib(gpu: str) -> int | None:
    """The shared memory one block may opt into (KiB) on a part ("NVIDIA H200") or an
    architecture ("sm_90"), or on a part the table lacks by the architecture its name
    implies ("NVIDIA A800-SXM4-80GB": sm_80); None where neither is known."""
    found = lookup(gpu)
    if found is not None:
        return found.max_smem_per_block_kib
    family = family_facts(gpu)
    return family["max_smem_per_block_kib"] if family else None
