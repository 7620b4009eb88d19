"""Names a person types (GPU, op, task, arch), matched to the names the store uses.

Why: a filter on ``gpu_name == "h200"`` matches nothing and answers with an empty report,
and retrieval for an unknown GPU quietly falls back to other hardware; a typo must be
told, not answered. A typed name matches a known one ignoring case, spaces, dashes and
underscores ("RMS_Norm" is rmsnorm); a GPU also by the facts table's short forms
("h200", "A100-80GB": kernels.shared.gpus.lookup). A name nobody knows raises ``UnknownName``
with the closest known name and the list.
"""

from __future__ import annotations

import difflib
import re
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kernelkb.kernels.shared.errors import UserError, quoted
from kernelkb.kernels.shared.gpus import lookup, unknown_gpu_message

if TYPE_CHECKING:  # matching needs no database: `optimize` uses it on a bare GPU host too
    from sqlmodel import Session

_SEPARATORS = re.compile(r"[^0-9a-z]+")


class UnknownName(UserError):
    """A typed name that matches no known op, task, GPU or architecture."""


def name_key(text: str) -> str:
    """What two spellings of one name share: lower case, letters and digits only."""
    return _SEPARATORS.sub("", text.lower())


def closest_name(name: str, known: Iterable[str]) -> str | None:
    options = {name_key(k): k for k in known}
    found = difflib.get_close_matches(name_key(name), list(options), n=1, cutoff=0.5)
    return options[found[0]] if found else None


def _spelled(name: str, candidates: Iterable[str], preferred: Iterable[str] = ()) -> str | None:
    """The candidate ``name`` spells: itself when it is one (a record spelled "ROPE" must not
    take the filter of "rope" from the records that say rope), else a preferred spelling
    (the task registry's, the facts table's), else the first in sorted order."""
    candidates = set(candidates)
    if name in candidates:
        return name
    key = name_key(name)
    for group in (sorted(set(preferred) & candidates), sorted(candidates)):
        for candidate in group:
            if name_key(candidate) == key:
                return candidate
    return None


def match_name(kind: str, name: str, known: Iterable[str], preferred: Iterable[str] = ()) -> str:
    """The known ``kind`` name (op, task, arch) that ``name`` spells; else UnknownName.
    ``preferred``: canonical spellings (also known) that win over other spellings of the
    same name, so a stored variant cannot capture a typed name."""
    preferred = tuple(preferred)
    names = sorted(set(known) | set(preferred))
    found = _spelled(name, names, preferred)
    if found is not None:
        return found
    near = closest_name(name, names)
    hint = f"; closest: {near!r}" if near else ""
    listed = ", ".join(names) if names else "(none: the store is empty)"
    raise UnknownName(f"unknown {kind} {quoted(name)}{hint}; known: {listed}")


def match_gpu(name: str, stored: Iterable[str]) -> str:
    """The GPU name to filter by: a name in the store (any spelling), else the stored name
    of the same part (kernels.shared.gpus), else the facts table's name (a known card with no
    experiences here: an empty answer that the caller labels); else UnknownName."""
    stored = sorted(set(stored))
    part = lookup(name)
    found = _spelled(name, stored, [part.name] if part is not None else [])
    if found is not None:
        return found
    if part is None:
        extra = [s for s in stored if lookup(s) is None]
        message = unknown_gpu_message(name)
        if extra:
            near = closest_name(name, extra)
            message += (f" This store also has: {', '.join(extra)}"
                        + (f" (closest: {near!r})" if near else "") + ".")
        raise UnknownName(message)
    same_part = [s for s in stored if (facts := lookup(s)) is not None and facts.name == part.name]
    return same_part[0] if same_part else part.name


def store_names(session: Session, fresh: bool = True) -> dict[str, list[str]]:
    """The op types, task ids, GPU names and architectures in the store, from the ladder's
    column snapshot (kept current per query; no scan of the table per request).
    ``fresh=False``: the snapshot as last read, without a database round trip, when there
    is one (a name new since then is then not found; the caller asks again fresh)."""
    from kernelkb.kb.db import engine_of
    from kernelkb.retrieval.columns import last_snapshot, snapshot

    snap = None if fresh else last_snapshot(engine_of(session))
    snap = snap or snapshot(session)
    key = (id(snap.vocab), snap.key)
    with _NAMES_LOCK:
        if key in _NAMES:
            return _NAMES[key]
    columns = {"op": "op_type", "task": "task_id", "gpu": "gpu_name", "arch": "arch"}
    names = {kind: sorted(w for w in list(snap.vocab[column].words) if w)
             for kind, column in columns.items()}
    with _NAMES_LOCK:
        if len(_NAMES) > 64:
            _NAMES.clear()
        _NAMES[key] = names
    return names


_NAMES: dict[tuple[int, int], dict[str, list[str]]] = {}  # per snapshot: sorted per request
_NAMES_LOCK = threading.Lock()
