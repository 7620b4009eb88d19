"""The interpreter without the guarantees a GPU never gives: each launch's programs run
in a shuffled order, program 0 never first (program_order.py), and plain stores of two
programs to one address are a data race (races.py). In fresh processes: each install
patches Triton's interpreter for the whole process."""

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


RACES = r'''
import torch, triton, triton.language as tl
from kernelkb.optimizer.sandbox import races
from kernelkb.optimizer.sandbox.errors import DataRace

assert races.install()

@triton.jit
def total(sum_ptr, x_ptr, ATOMIC: tl.constexpr):
    part = tl.load(x_ptr + tl.program_id(0))
    if ATOMIC:
        tl.atomic_add(sum_ptr, part)
    else:
        tl.store(sum_ptr, tl.load(sum_ptr) + part)  # every program, one address

@triton.jit
def own_slots(out_ptr, x_ptr):
    i = tl.program_id(0)
    tl.store(out_ptr + i, tl.load(x_ptr + i))
    tl.store(out_ptr + i, tl.load(x_ptr + i) * 2)  # a program storing twice: no race

x = torch.ones(8)
total[(8,)](torch.zeros(1), x, ATOMIC=True)
own_slots[(8,)](torch.zeros(8), x)
try:
    total[(8,)](torch.zeros(1), x, ATOMIC=False)
except Exception as err:
    chain = [err, err.__cause__, err.__context__]
    print("race" if any(isinstance(e, DataRace) for e in chain) else repr(err))
'''


def test_plain_stores_of_two_programs_to_one_address_are_a_race() -> None:
    done = subprocess.run([sys.executable, "-c", RACES], capture_output=True, text=True,
                          env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "race", done.stdout
