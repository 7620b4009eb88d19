"""What a user would write instead of each task's Triton kernel: the peers it must beat.

Each peer is called the way a model calls it, in its own layout and in the input dtype:
PyTorch eager (the formulation models use), ``torch.compile`` of it (dynamic=False, so
each shape gets its own kernel), Liger-Kernel where it has the op (softmax, RMSNorm,
SwiGLU, RoPE), cuBLAS for matmul, and for the fused attention the unfused pipeline (RoPE,
cache write, SDPA) eager and compiled. A peer is a candidate like any other: it is
checked against the task's reference before it is timed (``optimizer/peers.py``).

RoPE is the Hugging Face Llama formulation in the input dtype: a cos/sin cache built once
(fp32 angles, ``cat(freqs, freqs)``, cast to the model's dtype), gathered at the tokens'
positions, ``q * cos + rotate_half(q) * sin``. Layout: a model projects to (batch, seq,
heads, head_dim) and views it as (batch, heads, seq, head_dim) with ``transpose(1, 2)``;
that view is what HF's ``apply_rotary_pos_emb`` and Liger's ``LigerRopeFunction`` take.
The task's inputs are that projection output, so the peers get the transposed *view* (no
copy, as in the model) and their outputs are viewed back; nobody pays a transpose.
Each task declares its own peers (``Task.peers``, built from the formulations here);
``peers_for`` reads them. Used by ``benchmarks/peers.py``, ``benchmarks/launch_bound.py``
and the end of every ``kernelkb optimize`` run on a GPU.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from kernelkb.kernels.base import Task

log = logging.getLogger(__name__)

ROPE_THETA = 10000.0
MAX_POSITIONS = 8192  # a Llama-3-8B's max_position_embeddings: the cache a model builds once


@dataclass(frozen=True)
class Peer:
    name: str
    fn: Callable
    how: str  # how it is called (formulation, layout, dtype): printed under the tables
    in_place: bool = False  # writes its inputs on purpose, as users call it (Liger RoPE)


# -- the formulations ---------------------------------------------------------------------
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


_ROPE_CACHES: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}


def rope_cache(head_dim: int, dtype: torch.dtype, device: torch.device | str,
               length: int = MAX_POSITIONS) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin [length, head_dim] in the model's dtype, built once per (head_dim, dtype,
    device) like HF's rotary module: fp32 angles, cat(freqs, freqs), cast."""
    key = (head_dim, dtype, str(device), length)
    if key not in _ROPE_CACHES:
        exponent = torch.arange(0, head_dim, 2, dtype=torch.int64, device=device).float()
        inv_freq = 1.0 / (ROPE_THETA ** (exponent / head_dim))
        freqs = torch.outer(torch.arange(length, device=device, dtype=torch.float32), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        _ROPE_CACHES[key] = (emb.cos().to(dtype), emb.sin().to(dtype))
    return _ROPE_CACHES[key]


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    """HF's apply_rotary_pos_emb: q, k (batch, heads, seq, dim), cos / sin (batch, seq, dim)."""
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def _rope_hf(q, k, positions, cos_cached, sin_cached):
    cos, sin = cos_cached[positions], sin_cached[positions]  # (batch, seq, head_dim)
    q_rot, k_rot = apply_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
    return q_rot.transpose(1, 2), k_rot.transpose(1, 2)


def rope_hf(apply: Callable = _rope_hf) -> Callable:
    """The task's run(q, k, positions) as an HF Llama layer computes it."""
    def call(q, k, positions):
        cos_cached, sin_cached = rope_cache(q.shape[-1], q.dtype, q.device)
        return apply(q, k, positions, cos_cached, sin_cached)
    return call


def rope_table(positions, head_dim, dtype):
    dims = torch.arange(0, head_dim, 2, device=positions.device).float()
    inv = 1.0 / (ROPE_THETA ** (dims / head_dim))
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


# -- Liger-Kernel (each imported when a task's peers() asks for it) ----------------------
def liger_softmax() -> Peer:
    from liger_kernel.ops.softmax import LigerSoftmaxFunction
    return Peer("liger", LigerSoftmaxFunction.apply, "LigerSoftmaxFunction")


def liger_rmsnorm() -> Peer:
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction
    return Peer("liger", lambda x, w, eps=1e-6: LigerRMSNormFunction.apply(
        x, w, eps, 0.0, "llama", False), "LigerRMSNormFunction, casting mode 'llama'")


def liger_swiglu() -> Peer:
    from liger_kernel.ops.swiglu import LigerSiLUMulFunction
    return Peer("liger", LigerSiLUMulFunction.apply, "LigerSiLUMulFunction")


def liger_rope_peer() -> Peer:
    from liger_kernel.ops.rope import LigerRopeFunction
    return Peer("liger", rope_hf(liger_rope(LigerRopeFunction.apply)),
                "LigerRopeFunction on the (batch, heads, seq, dim) views, cos/sin "
                "gathered from the HF cache in the input dtype; rotates q, k in place",
                in_place=True)


def liger_rope(fn) -> Callable:
    """Liger's RoPE as HF's patch calls it: q, k (batch, heads, seq, dim) views of the
    projection, cos / sin (batch, seq, dim) at the tokens' positions."""
    def apply(q, k, positions, cos_cached, sin_cached):
        cos, sin = cos_cached[positions], sin_cached[positions]
        q_rot, k_rot = fn(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
        return q_rot.transpose(1, 2), k_rot.transpose(1, 2)
    return apply


# -- building a task's list ---------------------------------------------------------------
def eager_and_compiled(fn: Callable, how: str | None = None) -> list[Peer]:
    """``fn`` as PyTorch eager and under torch.compile(dynamic=False): the two peers every
    op has (a task's default, with its reference as ``fn``)."""
    return [Peer("eager", fn, how or f"PyTorch eager ({getattr(fn, '__name__', 'fn')})"),
            Peer("compiled", torch.compile(fn, dynamic=False),
                 "the same, torch.compile(dynamic=False)")]


def optional(build: Callable[[], Peer]) -> list[Peer]:
    """A peer from a package that may be missing (Liger-Kernel): [] with a warning then."""
    try:
        return [build()]
    except ImportError as err:
        log.warning("%s not importable (%s): its column stays empty", build.__name__, err)
        return []


# -- the peers of a task ------------------------------------------------------------------
def peers_for(task: Task) -> dict[str, Peer]:
    """{name: Peer} a user would pick instead of the task's kernel: what the task declares
    (``Task.peers``), else its reference eager and compiled."""
    declared = task.peers() if task.peers is not None else eager_and_compiled(task.reference)
    peers: dict[str, Peer] = {}
    for peer in declared:
        if not isinstance(peer, Peer):
            raise TypeError(f"task {task.name}: peers() gave a {type(peer).__name__}, "
                            "not a kernels.peers.Peer")
        if peer.name in peers:
            raise ValueError(f"task {task.name}: two peers named {peer.name!r}")
        peers[peer.name] = peer
    return peers
