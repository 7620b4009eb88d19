"""A user's task: y = rmsnorm(x + residual) * weight, row-wise, fp32 accumulation."""

import torch

from kernelkb.kernels.base import ELEMENTWISE_TOLERANCES, Knob, Task, read_template


def reference(x, residual, weight, eps=1e-6):
    h = x.float() + residual.float()
    return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def make_inputs(shape, dtype, seed, device):
    rows, hidden = shape
    gen = torch.Generator(device=device).manual_seed(seed)
    x, r = (torch.randn(shape, generator=gen, device=device) for _ in range(2))
    w = 1.0 + 0.5 * torch.randn((hidden,), generator=gen, device=device)
    return x.to(dtype), r.to(dtype), w.to(dtype)


def bytes_moved(shape, dtype):
    rows, hidden = shape
    return (3 * rows * hidden + hidden) * dtype.itemsize


TASK = Task(
    name="add_rmsnorm",
    op_type="add_rmsnorm",
    description="Residual add then RMSNorm with weight over the last dim, eps=1e-6.",
    signature="run(x, residual, weight, eps=1e-6) -> Tensor[rows, hidden]",
    reference=reference,
    make_inputs=make_inputs,
    shape_names=("rows", "hidden"),
    sweep_shapes=((1024, 4096), (4096, 8192)),
    edge_shapes=((1, 1), (3, 1500)),
    cpu_shapes=((8, 512),),
    dtypes=("float16", "float32"),
    tolerances=ELEMENTWISE_TOLERANCES,
    bytes_moved=bytes_moved,
    flops=lambda shape, dtype: 5 * shape[0] * shape[1],
    template=read_template(__file__),
    knobs=(Knob("NUM_WARPS", (1, 2, 4, 8), "warps_stages"),
           Knob("ROWS_PER_PROGRAM", (1, 2), "launch_shape", "rows per program")),
    related_ops=("rmsnorm",),
)
