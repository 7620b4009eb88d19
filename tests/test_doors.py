"""The facade is a gate: no door (kernelkb: CLI, HTTP API, MCP, web pages) reaches the
store past ``kernelkb.service.LocalKnowledge`` (or ``retrieval.protocol.Knowledge``). A door
that imported sqlmodel, sqlalchemy, the engine module (kb.db) or the table models
(kb.models), or took the facade's own session or engine, would run SQL beside the
store's queries; this finds either anywhere in a door module, at the top or inside a
function."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FACADE = ROOT / "kernelkb" / "service.py"  # the application's one way into the store


def door_modules() -> list[Path]:
    """Every module of the application (kernelkb/) but the facade itself."""
    return sorted(p for p in (ROOT / "kernelkb").rglob("*.py") if p != FACADE)

STORE_INSIDES = ("sqlmodel", "sqlalchemy", "kernelkb.kb.db", "kernelkb.kb.models")
# (door module, module it may import, with what is in it), each with its reason:
ALLOWED = {
    # rendering the exceptions a bad database URL or a broken database raises (one line
    # for the user, exit 2 / 422): the classes only, no session, engine or query
    ("kernelkb/errors.py", "sqlalchemy.exc"),
}


def imported(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of every import in the tree; ``from a import b`` names a.b too."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return found


def within(module: str, names: tuple[str, ...]) -> bool:
    return any(module == name or module.startswith(name + ".") for name in names)


def store_insides(path: Path, where: str) -> list[str]:
    """The imports of the store's insides in ``path``, the door module at ``where``."""
    allowed = tuple(module for door, module in ALLOWED if door == where)
    return [f"{where}:{line}: {module}"
            for line, module in imported(ast.parse(path.read_text(), str(path)))
            if within(module, STORE_INSIDES) and not within(module, allowed)]


def test_no_door_imports_the_store_insides() -> None:
    doors = door_modules()
    assert len(doors) > 40  # every door was walked (cli, api, mcp, web)
    found = [line for path in doors
             for line in store_insides(path, path.relative_to(ROOT).as_posix())]
    assert not found, "\n".join(found)


STORE_HANDLES = ("session", "engine")  # LocalKnowledge's own, for the store's modules


def store_handles(path: Path, where: str) -> list[str]:
    """Uses of the facade's session or engine in ``path`` (``kb.session()``,
    ``kb.engine``): a door that takes them runs queries of its own without an import."""
    return [f"{where}:{node.lineno}: .{node.attr}"
            for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.Attribute) and node.attr in STORE_HANDLES]


def test_no_door_takes_the_facades_session_or_engine() -> None:
    found = [line for path in door_modules()
             for line in store_handles(path, path.relative_to(ROOT).as_posix())]
    assert not found, "\n".join(found)


FACADE_INSIDES = ("embedder", "index")  # LocalKnowledge's own, for its own methods
FACADE_NAMES = ("kb", "knowledge", "store")  # what the doors call the facade


def facade_insides(path: Path, where: str) -> list[str]:
    """Uses of the facade's embedder or vector index in ``path`` (``kb.embedder``,
    ``request.app.state.knowledge.index``): a door that tests or calls them depends on
    how the facade is built, where a named method says what it needs. Only on a name the
    doors give the facade: ``rejected.index`` (an item's position) is no reach-through."""
    def facade(value: ast.expr) -> bool:
        name = value.id if isinstance(value, ast.Name) else \
            value.attr if isinstance(value, ast.Attribute) else ""
        return name.lstrip("_") in FACADE_NAMES

    return [f"{where}:{node.lineno}: .{node.attr}"
            for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.Attribute) and node.attr in FACADE_INSIDES
            and facade(node.value)]


def test_no_door_reaches_the_facades_embedder_or_index() -> None:
    found = [line for path in door_modules()
             for line in facade_insides(path, path.relative_to(ROOT).as_posix())]
    assert not found, "\n".join(found)


def test_the_gate_catches_a_session_in_a_door(tmp_path: Path) -> None:
    """The check fails on planted imports: a page with a session and a model of its own,
    and the allowed exception classes anywhere but the door allowed them."""
    planted = tmp_path / "page.py"
    planted.write_text("def page(kb):\n    from sqlmodel import Session\n"
                       "    from kernelkb.kb import models\n"
                       "from sqlalchemy.exc import DatabaseError\n")
    found = {line.split(": ")[1] for line in store_insides(planted, "kernelkb/web/page.py")}
    assert found == {"sqlalchemy.exc", "sqlalchemy.exc.DatabaseError", "sqlmodel",
                     "sqlmodel.Session", "kernelkb.kb.models"}
    allowed = {line.split(": ")[1] for line in store_insides(planted, "kernelkb/errors.py")}
    assert allowed == {"sqlmodel", "sqlmodel.Session", "kernelkb.kb.models"}  # only that
    planted.write_text("def export(kb):\n    with kb.session() as s:\n        pass\n"
                       "    return bad_rows(kb.engine)\n")
    assert sorted(store_handles(planted, "page.py")) == ["page.py:2: .session",
                                                         "page.py:4: .engine"]
    planted.write_text("def route(kb, request, report):\n    if kb.embedder is None:\n"
                       "        return request.app.state.knowledge.index\n"
                       "    return [r.index for r in report.rejected], self._knowledge.index\n")
    assert sorted(facade_insides(planted, "route.py")) == [
        "route.py:2: .embedder", "route.py:3: .index", "route.py:4: .index"]
