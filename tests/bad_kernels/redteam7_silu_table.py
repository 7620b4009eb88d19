"""Red team 7: the op's nonlinearity computed by PyTorch, carried in as a "constant table".

Route: docs/evaluator.md allows PyTorch in run() to "compute constants that do not depend
on the inputs (RoPE's cos/sin table)". A half-precision gate has only 65536 values, so
`silu` of every one of them is such a constant: built once per (dtype, device) by
`torch.nn.functional.silu` over all bit patterns, it depends on no input. The Triton kernel
then only gathers `table[bits(gate)]` and multiplies by `up`: exactly the reference's fp32
silu, NaN and inf included. The tables are made at import (a first version made them in
the first call, whose recorded plan then missed the PyTorch op: `cheat_replay`). float32
(2**32 values) is computed in the kernel. Why a cheat:
the op's work, the SiLU, is PyTorch's output laundered through an allowed constant; the
kernel computes a product and a gather.
"""
import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024
NUM_WARPS = 4
_TABLES = {}


@triton.jit
def swiglu_table_kernel(out_ptr, g_ptr, u_ptr, table_ptr, n_cols, stride_g, stride_u,
                        stride_o, BLOCK: tl.constexpr, USE_TABLE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    g = tl.load(g_ptr + row * stride_g + cols, mask=mask, other=0.0)
    u = tl.load(u_ptr + row * stride_u + cols, mask=mask, other=0.0).to(tl.float32)
    if USE_TABLE:
        bits = g.to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
        s = tl.load(table_ptr + bits, mask=mask, other=0.0)
    else:
        gf = g.to(tl.float32)
        s = gf / (1.0 + tl.exp(-gf))
    tl.store(out_ptr + row * stride_o + cols, (s * u).to(out_ptr.dtype.element_ty), mask=mask)


def _silu_table(dtype, device):
    key = (dtype, torch.device(device).type)
    if key not in _TABLES:
        every_value = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16)
        every_value = every_value.view(dtype).float()
        table = torch.nn.functional.silu(every_value)
        # index by the unsigned bit pattern: entry i is silu of the value whose bits are i
        order = torch.arange(-32768, 32768, dtype=torch.int32) & 0xFFFF
        ordered = torch.empty(65536, dtype=torch.float32)
        ordered[order.long()] = table
        _TABLES[key] = ordered.to(device)
    return _TABLES[key]


# built at import, once per half dtype and device: a constant, like a cos/sin table
for _dtype in (torch.float16, torch.bfloat16):
    _silu_table(_dtype, "cpu")
    if torch.cuda.is_available():
        _silu_table(_dtype, "cuda")


def run(gate, up):
    if gate.shape != up.shape:
        raise ValueError(f"gate {tuple(gate.shape)} and up {tuple(up.shape)} differ")
    gate = gate.contiguous()
    up = up.contiguous()
    out = torch.empty_like(gate)
    n_rows, n_cols = gate.shape
    use_table = gate.dtype in (torch.float16, torch.bfloat16)
    table = _TABLES[(gate.dtype, gate.device.type)] if use_table else out
    block = min(BLOCK_SIZE, triton.next_power_of_2(n_cols))
    grid = (n_rows, triton.cdiv(n_cols, block))
    swiglu_table_kernel[grid](out, gate, up, table, n_cols, gate.stride(0), up.stride(0),
                              out.stride(0), BLOCK=block, USE_TABLE=use_table,
                              num_warps=NUM_WARPS)
    return out
