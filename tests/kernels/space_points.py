"""One point of a task's space checked on the GPU, in a worker process of a pool
(tests/kernels/test_space_gpu.py): importable on its own, returns plain data.

A point predicted to fit the GPU's shared memory must compute the op on every edge shape
(output and written inputs within the task's tolerances); one predicted over the limit
must be refused with Triton's OutOfResources where the prediction says so, and nothing
else; the shared memory its compiled kernels use must stay within the prediction.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

REDUCTION_SCRATCH = 1024  # reductions' and layout conversions' scratch: not modelled


def check_point(task_name: str, config: dict[str, Any], dtypes: tuple[str, ...]) -> dict:
    import torch
    from kernel_checks import assert_task_close
    from triton.runtime.errors import OutOfResources

    from kernels.base import DTYPES, get_task, load_candidate
    from kernels.resources import smem_limit
    from optimizer.sandbox.compiled_info import kernel_resources

    task, limit = get_task(task_name), smem_limit()
    digest = hashlib.sha1(json.dumps(config, sort_keys=True).encode()).hexdigest()[:10]
    problems: list[str] = []
    refused = 0
    for dtype in dtypes:
        where = f"{task_name} {dtype} {config}"
        module = load_candidate(task.render(config), f"point_{task_name}_{digest}_{dtype}")
        for shape in task.edge_shapes:
            label = task.shape_label(shape)
            over = limit is not None and task.smem_bytes(
                {**task.default_config, **config}, shape, DTYPES[dtype]) > limit
            inputs = task.make_inputs(shape, DTYPES[dtype], 1234, "cuda")
            ref_in = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            run_in = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            expected = task.reference(*ref_in)
            try:
                actual = module.run(*run_in)
                torch.cuda.synchronize()
                assert_task_close(task, dtype, actual, expected, label=f"{label} output")
                for i in task.mutated_inputs:
                    assert_task_close(task, dtype, run_in[i], ref_in[i], label=f"{label} in {i}")
            except OutOfResources as err:
                if over:
                    refused += 1
                else:
                    problems.append(f"{where} ({label}): out of resources, not predicted: {err}")
            except Exception as err:  # noqa: BLE001 - any other failure is a problem
                problems.append(f"{where} ({label}): {type(err).__name__}: {err}"[:1500])
        used = kernel_resources(module)["smem_bytes"]
        need = task.smem_need(config, task.edge_shapes, (dtype,))
        if used is not None and used > need + REDUCTION_SCRATCH:
            problems.append(f"{where}: compiled kernels use {used} B of shared memory, "
                            f"the model predicts {need} B")
    return {"problems": problems, "refused": refused}
