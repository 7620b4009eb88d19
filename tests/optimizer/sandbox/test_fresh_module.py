"""Each shape's checks run on the candidate's module as imported (plan_bind.PlanFresh), as
the exported op records each layout's plan: what the judge checks is what users run."""

from __future__ import annotations

from pathlib import Path

import pytest
from redteam import judged_as_users_get_it

BAD = Path(__file__).parents[2] / "bad_kernels"


@pytest.mark.slow
def test_a_kernel_lazy_on_its_modules_first_call_is_refused() -> None:
    """No row max on a fresh module's first call, honest after: the export would run the
    lazy launches on every layout. The first call's plan, replayed on the large-logit
    inputs a later (warm) call was checked on, is wrong there."""
    judged_as_users_get_it("softmax", (BAD / "fresh_softmax_lazy_first_call.py").read_text(),
                           "cheat_replay")


def test_every_check_of_a_shape_starts_from_the_module_as_imported(tmp_path: Path) -> None:
    """A module that counts its calls in a global and on its kernel object: a fresh
    instance per recording sees 0 in both; its kernel takes the first instance's caches
    (nothing compiles or tunes twice); a tensor made at import that is unchanged is shared
    while one a call changed is made anew."""
    import torch

    from kernelkb.kernels.candidate_loading import load_candidate
    from kernelkb.kernels.plan_bind import PlanFresh

    source = '''
import torch, triton, triton.language as tl
NAMES = sorted((k, type(v).__name__) for k, v in globals().items())  # import's own names
CALLS = []
TABLE = torch.arange(4.0)
WORK = torch.zeros(4)

@triton.jit
def k(x_ptr):
    pass

k.seen = []

@triton.autotune(configs=[triton.Config({})], key=[])
@triton.jit
def tuned(x_ptr):
    pass

def run(x):
    CALLS.append(1)
    k.seen.append(1)
    WORK.add_(1)
    return len(CALLS) + 10 * len(k.seen)
'''
    module = load_candidate(source, module_name="candidate")
    assert [module.run(None) for _ in range(3)] == [11, 22, 33]
    fresh = PlanFresh(module.run)
    again = fresh()
    assert again(None) == 11 and again(None) == 22 and fresh()(None) == 11
    made = again.__globals__
    assert made is not vars(module)
    assert made["k"] is not module.k  # a new kernel object: what hangs on it is fresh
    assert made["tuned"].cache is module.tuned.cache  # the autotuner's choices are shared
    assert made["TABLE"] is module.TABLE  # unchanged since the import: one copy
    assert made["WORK"] is not module.WORK and torch.equal(made["WORK"], torch.full((4,), 2.0))
    assert made["__file__"] == module.__file__  # the judge knows the candidate's frames by it
    assert made["NAMES"] == module.NAMES  # nothing tells a fresh import from the first


@pytest.mark.slow
def test_a_kernel_lazy_on_a_fresh_modules_first_strided_call_is_refused() -> None:
    """No row max on a fresh module's first call of strided rows: the plan the export
    records for that layout. The worker records each other layout's call from a fresh
    import and replays its plan on large values laid out so (check_layout_plans); the
    judge's last lap, asking a fresh module, also meets it (wrong_result there)."""
    judged_as_users_get_it(
        "softmax", (BAD / "fresh_softmax_lazy_first_strided_call.py").read_text(),
        "cheat_replay")
