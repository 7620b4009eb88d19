"""What a user would write instead of each task's Triton kernel: the peers it must beat.

PyTorch eager (the formulation models use), ``torch.compile`` of it (dynamic=False, so
each shape gets its own kernel), Liger-Kernel where it has the op (softmax, RMSNorm,
SwiGLU, RoPE), cuBLAS for matmul, and for the fused attention the unfused pipeline (RoPE,
cache write, SDPA) eager and compiled. Used by ``benchmarks/peers.py`` and by the end of
every ``kernelkb optimize`` run on a GPU.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch
import torch.nn.functional as F

from kernels.base import Task

log = logging.getLogger(__name__)


def softmax_eager(x):
    return torch.softmax(x, dim=-1)


def rmsnorm_eager(x, w, eps=1e-6):  # the Llama / Hugging Face formulation
    xf = x.float()
    return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def swiglu_eager(gate, up):
    return F.silu(gate) * up


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope_table(positions, head_dim, dtype):
    dims = torch.arange(0, head_dim, 2, device=positions.device).float()
    inv = 1.0 / (10000.0 ** (dims / head_dim))
    freqs = positions.float()[:, None] * inv[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def attention_unfused(q, k, v, k_cache, v_cache, cache_len):
    """RoPE, cache write, SDPA: the pipeline the fused kernel replaces."""
    seq, head_dim = q.shape[2], q.shape[3]
    total = cache_len + seq
    positions = torch.arange(cache_len, total, device=q.device)
    cos, sin = rope_table(positions, head_dim, q.dtype)
    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin
    k_cache[:, :, cache_len:total] = k
    v_cache[:, :, cache_len:total] = v
    keys, values = k_cache[:, :, :total], v_cache[:, :, :total]
    if cache_len == 0:
        return F.scaled_dot_product_attention(q, keys, values, is_causal=True)
    visible = torch.arange(total, device=q.device)[None, :] <= positions[:, None]
    return F.scaled_dot_product_attention(q, keys, values, attn_mask=visible)


def liger_peer(task_name: str) -> Callable | None:
    try:
        if task_name == "softmax":
            from liger_kernel.ops.softmax import LigerSoftmaxFunction
            return LigerSoftmaxFunction.apply
        if task_name == "rmsnorm":
            from liger_kernel.ops.rms_norm import LigerRMSNormFunction
            return lambda x, w, eps=1e-6: LigerRMSNormFunction.apply(x, w, eps, 0.0, "llama", False)
        if task_name == "swiglu":
            from liger_kernel.ops.swiglu import LigerSiLUMulFunction
            return LigerSiLUMulFunction.apply
        if task_name == "rope":
            from liger_kernel.ops.rope import LigerRopeFunction
            return liger_rope(LigerRopeFunction)
    except ImportError as err:
        log.warning("Liger-Kernel not importable (%s): its column stays empty", err)
    return None


def liger_rope(fn):
    """Liger wants (batch, heads, seq, dim) and a cos/sin table; ours is (batch, seq, ...)."""
    def call(q, k, *rest):
        positions = torch.arange(q.shape[1], device=q.device)
        cos, sin = rope_table(positions, q.shape[-1], q.dtype)
        return fn(q.transpose(1, 2), k.transpose(1, 2), cos[None], sin[None])
    return call


def eager_peer(task: Task) -> Callable:
    table = {"softmax": softmax_eager, "rmsnorm": rmsnorm_eager, "swiglu": swiglu_eager,
             "attention": attention_unfused, "matmul": torch.matmul}
    return table.get(task.name, task.reference)


def peers_for(task: Task) -> dict[str, Callable]:
    eager = eager_peer(task)
    name = "cuBLAS" if task.name == "matmul" else (
        "unfused eager" if task.name == "attention" else "eager")
    peers = {name: eager}
    if task.name != "matmul":
        compiled = torch.compile(eager, dynamic=False)
        peers["unfused compiled" if task.name == "attention" else "compiled"] = compiled
    liger = liger_peer(task.name)
    if liger is not None:
        peers["liger"] = liger
    return peers
