"""The task registry, and where its tasks come from: found, never listed.

Three sources, read in this order the first time a task is asked for that is not yet
registered (``get_task``) and whenever all of them are (``all_tasks``):

1. every module of this package (``kernels/*.py``): a module defines a task by calling
   ``register(Task(...))`` or by holding a ``Task`` at module level;
2. every ``*.py`` file (not starting with ``_``) in the folders a user names: the
   ``tasks_dir`` setting (``KERNELKB_TASKS_DIR``, several joined by ``os.pathsep``) and
   ``--tasks-dir``; entry modules pass them to ``add_tasks_dirs`` (this package reads no
   settings); a file's kernel template sits in ``templates/`` beside it;
3. the ``kernelkb.tasks`` entry point group of installed distributions: each entry names
   a module (its tasks), a ``Task`` or a sequence of them.

Each task keeps its ``Origin``, which the sandbox uses to load the same task in its
worker process (``load_origin``) and to make its files visible there.

The registry (``TASKS``, ``register``, ``get_task``, ``all_tasks``) lives here, beside
the sources it reads, so the task model (``kernels.base``) never imports what finds it.
Imports nothing heavy at module level: the CLI calls ``add_tasks_dirs`` before it knows
whether a command needs torch.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import logging
import os
import pkgutil
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from kernelkb.kernels.shared.atomic import replaced
from kernelkb.kernels.shared.errors import UserError
from kernelkb.kernels.validation import TaskDefinitionError, closest

if TYPE_CHECKING:
    from kernelkb.kernels.base import Task

ENTRY_POINT_GROUP = "kernelkb.tasks"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Origin:
    """Where a task was declared."""

    kind: str  # "builtin" (kernels/), "folder" (a tasks folder), "entry_point"
    module: str  # import name (a folder's file gets a private one)
    file: str  # the module's file
    root: str = ""  # entry point: the sys.path folder its top-level module is found in
    entry_point: str = ""  # entry point: "name = value"

    def describe(self) -> str:
        if self.kind == "entry_point":
            return f"entry point {self.entry_point!r} ({self.file})"
        return f"{self.kind} {self.file}"

    def request(self) -> dict[str, str]:
        """What the sandbox's worker needs to load the task again (``load_origin``)."""
        if self.kind == "folder":
            return {"file": self.file}
        return {"module": self.module, "root": self.root}


_lock = threading.RLock()
_ORIGINS: dict[str, Origin] = {}
_LOADING: list[Origin] = []
_LOADED: set[str] = set()  # "builtin", file paths, entry point ids
_FOLDERS: list[Path] = []
_scanned_path: tuple[str, ...] | None = None


# -- what the registry asks ------------------------------------------------------------
def loading() -> Origin | None:
    """The origin of the module being loaded now (None: a task built elsewhere)."""
    return _LOADING[-1] if _LOADING else None


def note_origin(name: str, origin: Origin | None) -> None:
    if origin is not None:
        _ORIGINS[name] = origin


def origin_of(name: str) -> Origin | None:
    return _ORIGINS.get(name)


def describe(name: str) -> str:
    origin = _ORIGINS.get(name)
    return origin.describe() if origin else "code in this process"


def origin_request(name: str) -> dict[str, str] | None:
    origin = _ORIGINS.get(name)
    return origin.request() if origin else None


# -- the registry -----------------------------------------------------------------------
# name -> Task, in the order tasks registered; filled by ``discover`` (every task module
# of this package, the folders a user names, the kernelkb.tasks entry points).
TASKS: dict[str, Task] = {}


def register(task: Task) -> Task:
    """Add a task (a task module may call this, or just define a module-level Task)."""
    if TASKS.get(task.name) is task:
        return task
    origin = loading()
    if task.name in TASKS:
        raise TaskDefinitionError(task.name, "name", (
            f"taken: {describe(task.name)} registered it first"
            + (f"; {origin.describe()} cannot" if origin else "")))
    TASKS[task.name] = task
    note_origin(task.name, origin)
    return task


class UnknownTask(UserError, KeyError):
    """A task name nobody registered (a KeyError, as a registry lookup is)."""

    def __str__(self) -> str:  # the message itself, not KeyError's quoted repr of it
        return str(self.args[0]) if self.args else ""


def get_task(name: str) -> Task:
    """The task called ``name``; UnknownTask (a KeyError) naming the known ones and the
    closest."""
    if name not in TASKS:
            discover()
    try:
        return TASKS[name]
    except KeyError:
        raise UnknownTask(f"unknown task {name!r}{closest(name, TASKS) or ';'} known: "
                          f"{', '.join(sorted(TASKS))}") from None


def all_tasks() -> dict[str, Task]:
    """Every task: this package's, the named folders', the installed entry points'."""
    discover()
    return dict(TASKS)


def related_ops_of(op_type: str) -> tuple[str, ...]:
    """The ops the registered tasks of ``op_type`` declare related (``Task.related_ops``,
    the one source of truth), first-declared first; what entry modules put on a query
    that names an op but no task object."""
    found: dict[str, None] = {}
    for task in all_tasks().values():
        if task.op_type == op_type:
            found.update(dict.fromkeys(op for op in task.related_ops if op != op_type))
    return tuple(found)



# -- the sources -----------------------------------------------------------------------
def add_tasks_dirs(folders: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Name folders of task files (read at the next discovery); ValueError for one that
    is not a folder. Returns the folders as resolved."""
    added = []
    for folder in folders:
        if not str(folder).strip():
            continue
        path = Path(folder).expanduser().resolve()
        if not path.is_dir():
            raise ValueError(f"tasks folder {folder} is not a folder")
        with _lock:
            if path not in _FOLDERS:
                _FOLDERS.append(path)
        added.append(path)
    return added


def split_dirs(value: str | None) -> list[str]:
    """A ``KERNELKB_TASKS_DIR`` value: folders joined by os.pathsep."""
    return [part for part in (value or "").split(os.pathsep) if part.strip()]


def tasks_dirs() -> list[Path]:
    return list(_FOLDERS)


def discover() -> None:
    """Load every source not loaded yet (this package, the folders, the entry points)."""
    with _lock:
        _load_builtins()
        for folder in list(_FOLDERS):
            _load_folder(folder)
        _load_entry_points()


def _load_builtins() -> None:
    if "builtin" in _LOADED:
        return
    from kernelkb import kernels

    for info in pkgutil.iter_modules(kernels.__path__):
        if info.ispkg or info.name.startswith("_"):
            continue
        name = f"kernelkb.kernels.{info.name}"
        spec = importlib.util.find_spec(name)
        origin = Origin("builtin", name, spec.origin if spec and spec.origin else "")
        with _declaring(origin):
            module = importlib.import_module(name)
        _register_module_tasks(module, origin)
    _LOADED.add("builtin")


def _load_folder(folder: Path) -> None:
    for path in sorted(folder.glob("*.py")):
        if not path.name.startswith("_"):
            load_file(path)


def load_file(path: str | os.PathLike[str]) -> ModuleType | None:
    """Import one task file by path (once) and register its tasks."""
    file = str(Path(path).resolve())
    if file in _LOADED:
        return sys.modules.get(_private_name(file))
    name = _private_name(file)
    origin = Origin("folder", name, file)
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ValueError(f"tasks file {file}: not importable")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    try:
        with _declaring(origin):
            spec.loader.exec_module(module)
        found = _register_module_tasks(module, origin)
    except TaskDefinitionError as err:
        sys.modules.pop(name, None)
        raise TaskDefinitionError(err.task, err.field, f"{err.problem} [in {file}]") from None
    except Exception as err:
        sys.modules.pop(name, None)
        raise TaskDefinitionError(Path(file).stem, "module", f"{file} failed to import: "
                                  f"{type(err).__name__}: {err}") from err
    if not found:
        log.warning("tasks file %s defines no task (no module-level Task, no register())",
                    file)
    _LOADED.add(file)
    return module


def _private_name(file: str) -> str:
    digest = hashlib.sha1(file.encode()).hexdigest()[:8]
    return f"kernelkb_task_{Path(file).stem}_{digest}"


def _load_entry_points() -> None:
    global _scanned_path
    path = tuple(sys.path)
    if path == _scanned_path:
        return  # entry points are read from sys.path: the same path, the same entries
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        ident = f"ep:{ep.name}={ep.value}"
        if ident in _LOADED:
            continue
        where = f"entry point {ep.name!r} = {ep.value!r} (group {ENTRY_POINT_GROUP})"
        try:
            spec = importlib.util.find_spec(ep.module)
            file = spec.origin if spec and spec.origin else ""
            origin = Origin("entry_point", ep.module, file, _root_of(file, ep.module),
                            f"{ep.name} = {ep.value}")
            with _declaring(origin):
                loaded = ep.load()
            found = _register_tasks(_tasks_of(loaded), origin)
        except TaskDefinitionError as err:
            raise TaskDefinitionError(err.task, err.field, f"{err.problem} [{where}]") from None
        except Exception as err:
            raise TaskDefinitionError(ep.name, "entry point", f"{where} failed to load: "
                                      f"{type(err).__name__}: {err}") from err
        if not found:
            log.warning("%s defines no task", where)
        _LOADED.add(ident)
    _scanned_path = path


def _root_of(file: str, module: str) -> str:
    """The sys.path folder ``module`` is imported from, given its file."""
    if not file:
        return ""
    path = Path(file)
    if path.name == "__init__.py":
        path = path.parent
    for _ in module.split("."):
        path = path.parent
    return str(path)


def load_origin(request: dict[str, str] | None) -> None:
    """Load a task where an ``Origin.request()`` says (the sandbox worker's side)."""
    if not request:
        return
    if request.get("file"):
        load_file(request["file"])
        return
    root = request.get("root")
    if root and root not in sys.path:
        sys.path.insert(0, root)
    module = importlib.import_module(request["module"])
    name = request["module"]
    spec_file = getattr(module, "__file__", "") or ""
    kind = "builtin" if name.startswith("kernelkb.kernels.") else "entry_point"
    origin = Origin(kind, name, spec_file, root or "")
    _register_module_tasks(module, origin)


# -- helpers ---------------------------------------------------------------------------
@contextmanager
def _declaring(origin: Origin) -> Iterator[None]:
    _LOADING.append(origin)
    try:
        yield
    finally:
        _LOADING.pop()


def _tasks_of(obj: Any) -> list[Any]:
    from kernelkb.kernels.base import Task

    if isinstance(obj, Task):
        return [obj]
    if isinstance(obj, ModuleType):
        return [v for v in vars(obj).values() if isinstance(v, Task)]
    if isinstance(obj, (list, tuple)) and all(isinstance(v, Task) for v in obj):
        return list(obj)
    raise TypeError(f"names a {type(obj).__name__}; expected a module, a Task or a "
                    "sequence of Tasks")


def _register_module_tasks(module: ModuleType, origin: Origin) -> list[Any]:
    return _register_tasks(_tasks_of(module), origin)


def _register_tasks(tasks: list[Any], origin: Origin) -> list[Any]:
    """Register the tasks not registered yet; give those without an origin this one (a
    module imported before discovery registered its task with no origin known)."""
    for task in tasks:
        if TASKS.get(task.name) is not task:
            with _declaring(origin):
                register(task)
        _ORIGINS.setdefault(task.name, origin)
    return tasks


# -- the registry's names without importing the tasks -----------------------------------
def _sources_key() -> str:
    """What the registry is built from, as files and entry points (path, size, mtime of
    each task source; name, value and distribution version of each entry point): equal
    keys, the same tasks. A change made elsewhere (a module a task file imports from
    outside its folder, an entry point's package edited in place without a new version)
    is not seen: ``KERNELKB_NO_TASK_CACHE=1`` reads the registry itself."""
    from kernelkb import kernels

    files: list[str] = []
    for folder in [*kernels.__path__, *(str(f) for f in list(_FOLDERS))]:
        for path in sorted(Path(folder).glob("*.py")):
            stat = path.stat()
            files.append(f"{path}:{stat.st_size}:{stat.st_mtime_ns}")
    points = sorted(f"{ep.name}={ep.value}@{getattr(ep.dist, 'version', '')}"
                    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
    # (not sys.path itself: it differs between `kernelkb` and `python -m`; what it
    # changes, the package's files and the entry points found, is in the key)
    return hashlib.sha256("\n".join([*files, "--", *points]).encode()).hexdigest()


def _summary_file() -> Path:
    from kernelkb.kernels.shared.folders import user_cache

    return user_cache() / "task_registry.json"


def registry_summary() -> dict[str, Any]:
    """``{"ops": [...], "tasks": [...], "related": {op: [...]}}`` of every registered task
    (what an entry module needs to match a typed name and fill a query's related ops),
    kept on disk under the sources' key: a `kernelkb query` reads it in a millisecond
    instead of importing every task module (torch, ~2 s on a 2-core CPU)."""
    import json

    # a process that holds the registry already answers from it: tasks registered in
    # code (``register``, tests) are not in any file; and it costs nothing more there
    live = "kernelkb.kernels.base" in sys.modules or os.environ.get("KERNELKB_NO_TASK_CACHE")
    key = None if live else _sources_key()
    file = _summary_file()
    if key is not None:
        try:
            cached = json.loads(file.read_text())
            if cached.get("key") == key:
                return cached["summary"]
        except (OSError, ValueError, KeyError, AttributeError):
            pass
    tasks = all_tasks()
    ops = sorted({t.op_type for t in tasks.values()})
    summary = {"ops": ops, "tasks": sorted(tasks),
               "related": {op: list(related_ops_of(op)) for op in ops}}
    if key is not None:
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            with replaced(file) as tmp:
                tmp.write_text(json.dumps({"key": key, "summary": summary}))
        except OSError:  # a read-only home: no cache, same answer
            pass
    return summary
