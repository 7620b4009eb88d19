"""Which ops transfer to which: the 'same op -> related ops' rung of the ladder."""

from __future__ import annotations

_PAIRS = [
    ("softmax", "rmsnorm"), ("softmax", "attention"), ("rmsnorm", "attention"),
    ("swiglu", "rope"), ("swiglu", "rmsnorm"), ("rope", "rmsnorm"),
    ("attention", "matmul"), ("rope", "attention"),
]

RELATED_OPS: dict[str, tuple[str, ...]] = {}
for _a, _b in _PAIRS:
    RELATED_OPS[_a] = (*RELATED_OPS.get(_a, ()), _b)
    RELATED_OPS[_b] = (*RELATED_OPS.get(_b, ()), _a)


def related_ops(op_type: str) -> tuple[str, ...]:
    return tuple(sorted(RELATED_OPS.get(op_type, ())))
