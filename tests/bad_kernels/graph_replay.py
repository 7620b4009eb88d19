"""Cheat (GPU): torch.softmax captured into a CUDA graph on an empty buffer, where it
computes nothing the dispatch mode would call data; the input copied in and the graph
replayed, which nothing records; the answer copied out by a Triton kernel. Expected:
torch_compute (the capture is refused to the candidate's code, and the counterfactual
call on decoys would come out right)."""
import torch
import triton
import triton.language as tl

_GRAPHS = {}


@triton.jit
def copy_kernel(out_ptr, y_ptr, n_cols, stride_y, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    y = tl.load(y_ptr + row * stride_y + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * stride_o + cols, y, mask=mask)


def run(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    block = triton.next_power_of_2(x.shape[1])
    key = (tuple(x.shape), x.dtype)
    if key not in _GRAPHS:
        static_in = torch.empty_like(x)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = torch.softmax(static_in, dim=-1)
        _GRAPHS[key] = (graph, static_in, static_out)
    graph, static_in, static_out = _GRAPHS[key]
    static_in.copy_(x)
    graph.replay()
    copy_kernel[(x.shape[0],)](out, static_out, x.shape[1], static_out.stride(0),
                               out.stride(0), BLOCK=block)
    return out
