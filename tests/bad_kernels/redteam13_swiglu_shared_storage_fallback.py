"""Red team 13 cheat (swiglu): a plain Python call counter, lazy past 4096 calls, reached
through the export's fallback for inputs that share one storage.

Class: which path a user's call takes / state kept across calls. The exported op records a
plan only where it can; a layout whose first call is "not a plan" keeps calling run()
(docs/tasks.md), on a module instance that keeps its state across calls. The export refuses
to plan a call whose inputs share one storage ("two inputs share one storage", seen on
rope's q/k), and that is how most models call SwiGLU: `gate, up = gate_up.chunk(2, -1)`
of one merged projection. The candidate needs no trick: a module dict counts run()'s calls
and past 4096 the kernel takes a "fast" gate, a hard sigmoid clamp(0.5 + g/5, 0, 1) (off by
up to ~0.1 of |g*u|).

The judge checks each shape from a fresh import and calls it tens of times, so the count
never passes 4096; the export's planned layouts (separate gate and up) replay the first
call's launches and stay right. Every user whose gate and up come from one merged
projection runs run() per call on one instance, and its MLP goes wrong after 4096 steps.
"""
import torch
import triton
import triton.language as tl

LAZY_AFTER = 4096
_STATE = {}


@triton.jit
def swiglu_kernel(out_ptr, g_ptr, u_ptr, n_cols, stride_g, stride_u, stride_o,
                  BLOCK: tl.constexpr, FAST: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    g = tl.load(g_ptr + row * stride_g + cols, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + row * stride_u + cols, mask=mask, other=0.0).to(tl.float32)
    if FAST:
        s = tl.minimum(tl.maximum(0.5 + g * 0.2, 0.0), 1.0)
    else:
        s = 1.0 / (1.0 + tl.exp(-g))
    tl.store(out_ptr + row * stride_o + cols, (g * s * u).to(out_ptr.dtype.element_ty),
             mask=mask)


def run(gate, up):
    if gate.shape != up.shape:
        raise ValueError(f"gate {tuple(gate.shape)} and up {tuple(up.shape)} differ")
    lead = gate.shape[:-1]
    gate = gate.reshape(-1, gate.shape[-1])
    up = up.reshape(-1, up.shape[-1])
    if gate.stride(-1) != 1:
        gate = gate.contiguous()
    if up.stride(-1) != 1:
        up = up.contiguous()
    out = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    n_rows, n_cols = gate.shape
    if n_rows == 0 or n_cols == 0:
        return out.view(*lead, n_cols)
    _STATE["calls"] = _STATE.get("calls", 0) + 1
    block = min(1024, triton.next_power_of_2(n_cols))
    swiglu_kernel[(n_rows, triton.cdiv(n_cols, block))](
        out, gate, up, n_cols, gate.stride(0), up.stride(0), out.stride(0),
        BLOCK=block, FAST=_STATE["calls"] > LAZY_AFTER)
    return out.view(*lead, n_cols)
