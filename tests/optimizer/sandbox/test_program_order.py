"""The interpreter without the guarantee a GPU never gives (program_order.py): each
launch's programs run in a shuffled order, program 0 never first. In a fresh process:
the install patches Triton's interpreter for the whole process."""

from __future__ import annotations

import os
import subprocess
import sys

SCRIPT = r'''
import torch, triton, triton.language as tl
from kernelkb.optimizer.sandbox import program_order

assert program_order.install()

@triton.jit
def arrival(counter_ptr, out_ptr):
    pid = tl.program_id(0) * tl.num_programs(1) + tl.program_id(1)
    tl.store(out_ptr + pid, tl.atomic_add(counter_ptr, 1))

for grid in [(16, 1), (3, 5), (2, 1)]:
    counter = torch.zeros(1, dtype=torch.int32)
    seen = torch.full((grid[0] * grid[1],), -1, dtype=torch.int32)
    arrival[grid](counter, seen)
    order = seen.tolist()
    assert sorted(order) == list(range(len(order))), order  # each program once
    assert order[0] != 0, order  # program 0 did not run first
    assert order != list(range(len(order))), order
print("shuffled")
'''


def test_programs_run_shuffled_and_each_once() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "shuffled", done.stdout
