"""Triton's own code for the shipped templates reads no register the clock rule refuses.

The rule (clock_reads.py) lets a kernel read only a thread's place in the grid and its
block's shared memory; any other special register is a clock. Triton's code generation
must stay inside that, or every honest kernel is refused on a GPU. Each task's naive
kernel is compiled here, without a GPU, for a Hopper target through every level the GPU's
rule reads (TTIR, TTGIR, LLVM IR, PTX), from the launches its ``run()`` makes under the
interpreter.
"""

from __future__ import annotations

import pytest
import torch

from kernelkb.kernels.candidate_loading import load_candidate
from kernelkb.kernels.discovery import all_tasks, get_task
from kernelkb.optimizer.sandbox import clock_reads
from kernelkb.optimizer.sandbox import narrow_addresses as frontend


def _levels(fn, signature: dict, constexprs: dict) -> dict[str, str]:
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import CUDABackend
    from triton.compiler import ASTSource

    target = GPUTarget("cuda", 90, 32)
    backend = CUDABackend(target)
    options = backend.parse_options({})
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    seen: dict = {}
    source = ASTSource(frontend._compilable(fn.fn, seen), signature=signature,
                       constexprs=constexprs)
    with frontend._language_compiled(seen):
        module = source.make_ir(target, options, backend.get_codegen_implementation(options),
                                backend.get_module_map(), context)
    stages: dict = {}
    backend.add_stages(stages, options, source.language)
    levels, metadata = {}, {}
    for level in ("ttir", "ttgir", "llir", "ptx"):
        module = stages[level](module, metadata)
        levels[level] = module if isinstance(module, str) else str(module)
    return levels


@pytest.mark.parametrize("task_name", all_tasks())
def test_the_templates_compiled_code_reads_no_refused_register(task_name, monkeypatch):
    from triton.runtime.interpreter import InterpretedFunction

    task = get_task(task_name)
    launches: list = []
    original = InterpretedFunction.run

    def recording(self, *args, **kwargs):
        launches.append((self, args, {k: v for k, v in kwargs.items()
                                      if k not in ("grid", "warmup")}))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(InterpretedFunction, "run", recording)
    module = load_candidate(task.template, f"codegen_{task_name}")
    module.run(*task.make_inputs(task.cpu_shapes[0], torch.float16, 0, "cpu"))
    assert launches
    for fn, args, kwargs in launches:
        _, signature, constexprs = frontend._signature(fn, args, kwargs)
        levels = _levels(fn, signature, constexprs)
        assert "llvm.nvvm.read.ptx.sreg" in levels["llir"] and ".entry" in levels["ptx"]
        assert clock_reads.ir_reads(levels) == [], fn.fn.__name__
