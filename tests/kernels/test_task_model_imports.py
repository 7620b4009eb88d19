"""The task model (kernels/base.py) imports nothing that imports it back: the registry,
discovery, the conditions and the rest stand beside it, so no import cycle runs through
it (issue 51: base -> validation -> base and base -> discovery -> base were the last).

Every import counts, at the top of a file, inside a function or under TYPE_CHECKING: the
modules' source is read (their AST), nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
PACKAGE = "kernelkb.kernels"
BASE = f"{PACKAGE}.base"


def module_file(name: str, root: Path = KERNELS) -> Path | None:
    """The file of a kernels module by its dotted name (None: not a kernels module)."""
    if name == PACKAGE:
        candidates = [root / "__init__.py"]
    elif name.startswith(PACKAGE + "."):
        parts = name.removeprefix(PACKAGE + ".").split(".")
        candidates = [root.joinpath(*parts).with_suffix(".py"),
                      root.joinpath(*parts, "__init__.py")]
    else:
        return None
    return next((path for path in candidates if path.is_file()), None)


def imported(path: Path, root: Path = KERNELS) -> set[str]:
    """The kernels modules a file imports, wherever the import stands."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from kernelkb.kernels import discovery` names a module too
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        else:
            continue
        found |= {n for n in names if module_file(n, root) is not None}
    return found


def paths_back(start: str, root: Path = KERNELS) -> list[list[str]]:
    """Every chain of imports from ``start``'s own imports that leads back to ``start``."""
    chains: list[list[str]] = []
    seen: set[str] = set()
    file = module_file(start, root)
    assert file is not None
    todo = [[start, name] for name in sorted(imported(file, root))]
    while todo:
        chain = todo.pop()
        if chain[-1] == start:
            chains.append(chain)
            continue
        if chain[-1] in seen:
            continue
        seen.add(chain[-1])
        file = module_file(chain[-1], root)
        assert file is not None
        todo += [[*chain, name] for name in sorted(imported(file, root))]
    return chains


def test_the_task_model_imports_nothing_that_imports_it() -> None:
    # the walk sees base's own imports: an empty answer is not a walk that read nothing
    assert {f"{PACKAGE}.conditions", f"{PACKAGE}.validation"} <= imported(KERNELS / "base.py")
    assert paths_back(BASE) == [], "\n".join(" -> ".join(c) for c in paths_back(BASE))


def test_the_registry_is_not_in_the_task_model() -> None:
    """What finds tasks (discovery: the registry, its sources) imports the model; the
    model names none of it."""
    assert f"{PACKAGE}.discovery" not in imported(KERNELS / "base.py")
    assert BASE in imported(KERNELS / "discovery.py")


def test_a_cycle_is_caught(tmp_path: Path) -> None:
    """The walk itself finds a planted cycle, through a function-level import."""
    (tmp_path / "base.py").write_text("from kernelkb.kernels.conditions import X\n")
    (tmp_path / "conditions.py").write_text(
        "def f():\n    from kernelkb.kernels import base\n")
    assert paths_back(BASE, tmp_path) == [[BASE, f"{PACKAGE}.conditions", BASE]]
