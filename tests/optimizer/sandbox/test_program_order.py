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
    i = tl.program_id(0).to(tl.int64)
    tl.store(out_ptr + i, tl.load(x_ptr + i))
    tl.store(out_ptr + i, tl.load(x_ptr + i) * 2)  # a program storing twice: no race

@triton.jit
def lanes_to_one(out_ptr, x_ptr, SAME: tl.constexpr):
    offs = tl.arange(0, 8)
    x = tl.load(x_ptr + offs)
    value = tl.zeros([8], tl.float32) + tl.sum(x, 0) if SAME else tl.cumsum(x, 0)
    tl.store(out_ptr + offs * 0, value)  # eight lanes, one address

@triton.jit
def exchanged(sum_ptr, x_ptr, RESET: tl.constexpr):
    part = tl.load(x_ptr + tl.program_id(0))
    if RESET:
        tl.atomic_xchg(sum_ptr, 0)  # every program the same value: a counter's reset
    else:  # a read-modify-write split into two atomics (int32: the interpreter's xchg)
        tl.atomic_xchg(sum_ptr, tl.atomic_add(sum_ptr, 0) + part)

def outcome(launch):
    try:
        launch()
    except Exception as err:
        chain = [err, err.__cause__, err.__context__]
        return "race" if any(isinstance(e, DataRace) for e in chain) else repr(err)
    return "fine"

x, n = torch.ones(8), torch.ones(8, dtype=torch.int32)
print(outcome(lambda: total[(8,)](torch.zeros(1), x, ATOMIC=True)),
      outcome(lambda: own_slots[(8,)](torch.zeros(8), x)),
      outcome(lambda: lanes_to_one[(1,)](torch.zeros(1), x, SAME=True)),
      outcome(lambda: exchanged[(8,)](torch.zeros(1, dtype=torch.int32), n, RESET=True)),
      outcome(lambda: total[(8,)](torch.zeros(1), x, ATOMIC=False)),
      outcome(lambda: lanes_to_one[(1,)](torch.zeros(1), x, SAME=False)),
      outcome(lambda: exchanged[(8,)](torch.zeros(1, dtype=torch.int32), n, RESET=False)))
'''


def test_plain_stores_of_two_programs_to_one_address_are_a_race() -> None:
    """Races a GPU has and the interpreter hides: plain stores of two programs to one
    address, lanes of one store to one address with different values, and a sum written
    back with an exchange; their legal twins (an atomic add, a program storing twice to
    its own slot, lanes agreeing, every program exchanging the same value) are not."""
    done = subprocess.run([sys.executable, "-c", RACES], capture_output=True, text=True,
                          env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["fine"] * 4 + ["race"] * 3, done.stdout
