"""A GPU's shared memory per block: the limit a configuration's tiles must fit.

The figure is the opt-in maximum one block may use (what Triton's launcher asks for), by
compute capability, from NVIDIA's CUDA programming guide. On a CUDA host the device's own
figure (``shared_memory_per_block_optin``) wins. The tasks predict each configuration's
need (``Task.smem_bytes``); ``Task.space(smem_limit)`` and the agents skip what cannot fit.
"""

from __future__ import annotations

import torch

SMEM_PER_BLOCK_OPTIN_KIB = {
    "sm_70": 96, "sm_75": 64, "sm_80": 163, "sm_86": 99, "sm_87": 163, "sm_89": 99,
    "sm_90": 227, "sm_100": 227, "sm_103": 227, "sm_120": 99,
}
# GPU names to compute capability, for a target named by its product name
ARCH_BY_NAME = (("H200", "sm_90"), ("H100", "sm_90"), ("GH200", "sm_90"), ("B200", "sm_100"),
                ("A100", "sm_80"), ("A800", "sm_80"), ("L40", "sm_89"), ("L4", "sm_89"),
                ("4090", "sm_89"), ("A10", "sm_86"), ("3090", "sm_86"), ("A40", "sm_86"),
                ("V100", "sm_70"), ("T4", "sm_75"))


def smem_limit(gpu: str | None = None) -> int | None:
    """Bytes of shared memory one block may use: of this process's CUDA device when
    ``gpu`` is None, else of an arch ("sm_90") or a GPU name ("NVIDIA H200"); None when
    unknown (the CPU interpreter has no such limit)."""
    if gpu is None:
        if not torch.cuda.is_available():
            return None
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        optin = getattr(props, "shared_memory_per_block_optin", None)
        if optin:
            return int(optin)
        gpu = f"sm_{props.major}{props.minor}"
    arch = gpu if gpu.startswith("sm_") else next(
        (a for fragment, a in ARCH_BY_NAME if fragment.lower() in gpu.lower()), None)
    kib = SMEM_PER_BLOCK_OPTIN_KIB.get(arch or "")
    return kib * 1024 if kib else None
