"""A GPU's shared memory per block: the limit a configuration's tiles must fit.

The figure is the opt-in maximum one block may use (what Triton's launcher asks for), by
compute capability, from the GPU table (kernels/shared/gpus.py: a part's own row, else its
architecture's). On a CUDA host the device's own figure (``shared_memory_per_block_optin``)
wins. The tasks predict each configuration's need (``Task.smem_bytes``);
``Task.space(smem_limit)`` and the agents skip what cannot fit.
"""

from __future__ import annotations

import torch

from kernelkb.kernels.shared.gpus import smem_per_block_kib


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
    kib = smem_per_block_kib(gpu)
    return kib * 1024 if kib else None
