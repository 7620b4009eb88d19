"""Session-wide setup, imported before any test module is collected.

Without CUDA, Triton kernels run in the CPU interpreter (TRITON_INTERPRET=1), which
checks correctness only, never speed. The variable must be set before triton is first
imported anywhere in the process: triton.language builds its own @jit helpers (tl.max,
tl.sum, ...) at import, in interpreter form only if the variable is already set. A test
module collected early that imports triton (through kernels or the sandbox) would
otherwise leave those helpers compiled-mode and every interpreted kernel would fail with
"Cannot call @triton.jit'd outside of the scope of a kernel".
"""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
