"""A configuration over the GPU's shared memory is its own error kind, not a surprise."""

from __future__ import annotations

from triton.runtime.errors import OutOfResources

from kernelkb.optimizer.sandbox.errors import classify_exception


def test_out_of_shared_memory_is_classified_as_out_of_resources() -> None:
    try:
        try:
            raise OutOfResources(262144, 232448, "shared memory")
        except OutOfResources as inner:
            raise RuntimeError("while launching attention_kernel") from inner
    except RuntimeError as err:
        assert classify_exception(err, stage="run") == ("compile", "out_of_resources")
