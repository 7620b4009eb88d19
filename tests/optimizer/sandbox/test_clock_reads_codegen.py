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
        levels = frontend.hopper_levels(fn, signature, constexprs,
                                        ("ttir", "ttgir", "llir", "ptx"))
        assert "llvm.nvvm.read.ptx.sreg" in levels["llir"] and ".entry" in levels["ptx"]
        assert clock_reads.ir_reads(levels) == [], fn.fn.__name__
