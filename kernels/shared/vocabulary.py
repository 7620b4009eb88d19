"""The closed vocabularies every layer speaks: edit categories, verdicts, round kinds and
data type names, each written once.

Closed on purpose: insights aggregate by category and verdict, so a typo must be a
validation error (kb.record), never a new category; the tasks (kernels/) file their knobs
under the same words the store keeps, and the entry points (CLI, HTTP API, MCP) offer the
same data types the tasks run.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal, get_args

# Edit categories an experience may carry.
EDIT_CATEGORIES: tuple[str, ...] = (
    "baseline",  # the starting kernel itself, measured once per run
    "tiling",  # block / tile sizes
    "warps_stages",  # num_warps, num_stages
    "fusion",  # fusing ops or passes into one kernel
    "precompute",  # hoisting work out of the kernel (e.g. RoPE sin/cos tables)
    "vectorization",  # wider or hinted loads / stores
    "masking",  # how bounds and masks are handled
    "causal_skip",  # skipping fully masked causal blocks
    "specialization",  # a branch specialised for even sizes, small shapes, ...
    "algorithm",  # a different formulation (online vs two-pass softmax, split-k, ...)
    "launch_shape",  # grid layout, rows per program, persistent programs
    "precision",  # accumulator or operand precision
    "memory_layout",  # strides, transposes, cache hints
    "other",
)
# what a task's knobs and variants may be filed under: all but "baseline", which tags the
# starting kernel itself, never a knob
KNOB_CATEGORIES: tuple[str, ...] = tuple(c for c in EDIT_CATEGORIES if c != "baseline")


class Verdict(str, Enum):
    """What the edit did, judged against its parent."""

    improved = "improved"
    neutral = "neutral"
    regressed = "regressed"
    incorrect = "incorrect"  # compiled and ran, wrong numbers
    failed = "failed"  # syntax / compile / runtime error, timeout, OOM
    invalid = "invalid"  # no real change, or a claimed gain within noise


# Why a round ran, as a record's provenance says it.
RoundKind = Literal["baseline", "exploit", "explore", "tune", "sweep", "revalidate"]
# The rounds an agent proposes an edit in (AgentContext.round_kind: the policy's exploit or
# explore, the tuner's tune); the others are the loop's own (baseline, the final sweep) or
# another command's (revalidate).
ProposalKind = Literal["exploit", "explore", "tune"]
if not set(get_args(ProposalKind)) <= set(get_args(RoundKind)):
    raise TypeError(f"ProposalKind {get_args(ProposalKind)} must be round kinds "
                    f"{get_args(RoundKind)}")

# The data types a task runs in, by the name records, queries and tools use (torch's
# dtype names; kernels.dtypes.DTYPES maps them to torch's dtypes).
Dtype = Literal["float32", "float16", "bfloat16"]
DTYPE_NAMES: tuple[str, ...] = get_args(Dtype)
