"""One point of a task's space checked on the GPU, in a worker process of a pool
(tests/kernels/test_space_gpu.py): importable on its own, returns plain data.

A point predicted to fit the GPU's shared memory must compute the op on every shape asked
(output and written inputs within the task's tolerances, compared on the GPU with the
sandbox's statistics); one predicted over the limit must be refused with Triton's
OutOfResources where the prediction says so, and nothing else; the shared memory its
compiled kernels use must stay within the prediction.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any


def check_point(task_name: str, config: dict[str, Any], dtypes: tuple[str, ...],
                which: str | tuple = "edge") -> dict:
    """``which``: a shape set's name, or one shape."""
    import torch
    from triton.runtime.errors import OutOfResources

    from kernelkb.kernels.candidate_loading import load_candidate
    from kernelkb.kernels.discovery import get_task
    from kernelkb.kernels.dtypes import DTYPES
    from kernelkb.kernels.resources import smem_limit
    from kernelkb.optimizer.sandbox import checks
    from kernelkb.optimizer.sandbox.compiled_info import kernel_resources

    began = time.perf_counter()
    task, limit = get_task(task_name), smem_limit()
    config = {**task.default_config, **config}
    shapes = task.shapes(which) if isinstance(which, str) else (tuple(which),)
    digest = hashlib.sha1(json.dumps(config, sort_keys=True).encode()).hexdigest()[:10]
    problems: list[str] = []
    refused = 0
    for dtype in dtypes:
        where = f"{task_name} {dtype} {config}"
        tol = task.tolerances[dtype]
        module = load_candidate(task.render(config), f"point_{task_name}_{digest}_{dtype}")
        for shape in shapes:
            label = task.shape_label(shape)
            over = limit is not None and task.smem_bytes(config, shape, DTYPES[dtype]) > limit
            inputs = task.make_inputs(shape, DTYPES[dtype], 1234, "cuda")
            ref_in, run_in = checks.snapshot(inputs), checks.snapshot(inputs)
            expected = task.reference(*ref_in)
            try:
                actual = module.run(*run_in)
                torch.cuda.synchronize()
            except OutOfResources as err:
                if not over:
                    problems.append(f"{where} ({label}): out of resources, not predicted: {err}")
                refused += over
                continue
            except Exception as err:  # noqa: BLE001 - any other failure is a problem
                problems.append(f"{where} ({label}): {type(err).__name__}: {err}"[:1500])
                continue
            pairs = [("output", actual, expected)]
            pairs += [(f"input {i}", run_in[i], ref_in[i]) for i in task.mutated_inputs]
            for what, got, want in pairs:
                stats = checks.compare_outputs(got, want, tol.atol, tol.rtol)
                verdict = stats if isinstance(stats, str) else checks.shape_verdict(
                    stats, tol.max_bias)
                if verdict:
                    text = stats if isinstance(stats, str) else checks.describe_failure(
                        verdict, label, stats, tol.max_bias)
                    problems.append(f"{where} {what} {text}")
            del inputs, ref_in, run_in, expected, actual
        used = kernel_resources(module)["smem_bytes"]
        need = task.smem_need(config, shapes, (dtype,))
        if used is not None and used > need:
            problems.append(f"{where}: compiled kernels use {used} B of shared memory, "
                            f"the model predicts {need} B")
        torch.cuda.empty_cache()
    return {"problems": problems, "refused": refused,
            "seconds": time.perf_counter() - began}
