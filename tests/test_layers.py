"""The import rule (docs/architecture.md): each root folder is one layer, and a module
imports only its own layer and the layers below it, never one above, at the top of the
file or inside a function.

From the bottom: the tasks and the floor of shared facts (kernels/, kernels/shared), the
store (kb/), the read side (retrieval/), the loop (optimizer/), the application
(kernelkb/: the doors and the facade). The sandbox, which runs beside the candidate on a
bare GPU host, imports only the tasks and the floor; the store and the read side import
no task module (they import torch) but the floor.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# root folder -> layer, from the bottom; kernelkb/ itself is the application on top
FOLDERS = {"kernels": 0, "kb": 1, "retrieval": 2, "optimizer": 3, "kernelkb": 4}
SANDBOX = "kernelkb.optimizer.sandbox"


def layer(module: str) -> int:
    """The layer of a module by the root folder it lies in (``kernelkb.kb.db``: kb/); the
    root package's own ``__init__`` (a path hook) and the seeds (data) are the floor's."""
    parts = module.split(".")
    if module == "kernelkb" or parts[1] == "seeds":
        return 0
    folder = parts[1] if len(parts) > 1 and parts[1] in FOLDERS else "kernelkb"
    return FOLDERS[folder]


def modules() -> list[tuple[str, Path]]:
    out = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "templates" in path.parts:  # kernel templates: text, not imported
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            if folder == "kernelkb":  # the package's own folder: kernelkb.cli, ...
                parts = parts[1:]
            name = ".".join(("kernelkb", *parts)).removesuffix(".__init__")
            out.append((name, path))
    return out


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every project import in the file, wherever it stands."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            # `from kernelkb import operations` names a module too
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return [(line, m) for line, m in found if m.split(".")[0] == "kernelkb"]


def test_the_layers_cover_every_module() -> None:
    names = [name for name, _ in modules()]
    assert len(names) > 150  # every package was walked
    assert {layer(n) for n in names} == set(FOLDERS.values())


@pytest.mark.parametrize("folder", FOLDERS)
def test_no_import_points_up(folder: str) -> None:
    upward = []
    for name, path in modules():
        if not name.startswith(f"kernelkb.{folder}"):
            continue
        for line, target in imports(path):
            if layer(target) > layer(name):
                upward.append(f"{path.relative_to(ROOT)}:{line}: {name} -> {target}")
    assert not upward, "\n".join(upward)


def test_the_sandbox_imports_only_the_tasks_and_the_floor() -> None:
    outside = []
    for name, path in modules():
        if name.startswith(SANDBOX):
            outside += [f"{path.relative_to(ROOT)}:{line}: {target}"
                        for line, target in imports(path)
                        if not target.startswith((SANDBOX, "kernelkb.kernels"))
                        and target != "kernelkb"]
    assert not outside, "\n".join(outside)


def test_the_store_and_retrieval_import_no_task_module() -> None:
    """A `kernelkb query` or a server answers without torch: below the optimizer only the
    floor of kernels is imported (the tasks reach the store through the application)."""
    below = ("kernelkb.kb", "kernelkb.retrieval")
    found = []
    for name, path in modules():
        if name.startswith(below):
            found += [f"{path.relative_to(ROOT)}:{line}: {target}"
                      for line, target in imports(path)
                      if target.startswith("kernelkb.kernels")
                      and not target.startswith("kernelkb.kernels.shared")]
    assert not found, "\n".join(found)


def test_an_upward_import_is_caught(tmp_path: Path) -> None:
    """The check itself fails on a planted violation (the store importing the loop)."""
    planted = tmp_path / "planted.py"
    planted.write_text("def f():\n    from kernelkb.optimizer.loop import Loop\n")
    assert [layer(t) > layer("kernelkb.kb.db") for _, t in imports(planted)] == [True, True]
