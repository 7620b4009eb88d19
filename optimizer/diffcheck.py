"""Did the candidate change anything that runs? (the article's section 5.2)

An agent may claim an optimisation while it only deleted a comment. The check compares
the parent and child after AST normalisation: comments, whitespace, formatting and
docstrings vanish, so an edit that touches only those is no edit at all and the round is
marked invalid before any GPU time is spent.
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass


@dataclass(frozen=True)
class DiffCheck:
    valid: bool
    diff: str  # unified diff parent -> child, as stored in the experience record
    reason: str | None = None  # why it is invalid


def unified_diff(parent: str, child: str, context: int = 2) -> str:
    lines = difflib.unified_diff(
        parent.splitlines(keepends=True), child.splitlines(keepends=True),
        fromfile="parent.py", tofile="candidate.py", n=context,
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def normalize(source: str) -> str | None:
    """Canonical text of the code without comments and docstrings; None if unparseable."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) \
                and body and _is_docstring(body[0]):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, annotate_fields=False, include_attributes=False)


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
        and isinstance(stmt.value.value, str)


def check(parent: str, child: str) -> DiffCheck:
    """Invalid when the diff is empty or only comments / whitespace / docstrings changed.

    An unparseable child is *valid* here: it is a real change, and the sandbox reports
    the syntax error as layered feedback, which teaches the agent more than 'invalid'.
    """
    diff = unified_diff(parent, child)
    if not diff:
        return DiffCheck(False, diff, "empty diff: the candidate is identical to its parent")
    before, after = normalize(parent), normalize(child)
    if after is not None and before == after:
        return DiffCheck(False, diff, "only comments, whitespace or docstrings changed: "
                                      "the code that runs is identical to its parent")
    return DiffCheck(True, diff)
