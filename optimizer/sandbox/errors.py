"""Classify a failure into a stage and an error kind, with a message the agent can use.

Both sides use it: the worker classifies Python exceptions, the runner classifies what
is left when the worker died (exit signal, stderr text). Messages are trimmed to the
lines that say what went wrong and where in the candidate, not the whole traceback.
"""

from __future__ import annotations

import os
import signal
import traceback

MAX_MESSAGE_CHARS = 800

_OOM_TEXTS = ("out of memory", "cannot allocate memory", "can't allocate memory",
              "std::bad_alloc")
_ILLEGAL_ACCESS_TEXTS = (
    "illegal memory access", "misaligned address", "unspecified launch failure",
    "out-of-bounds", "out of bounds access",
)


class OutOfBoundsAccess(RuntimeError):
    """Raised by the interpreter's bounds guard: a load or store outside every tensor."""


class NarrowAddress(RuntimeError):
    """A kernel whose address offsets may wrap in 32 bits (narrow_addresses.py): refused
    at compile, before it runs."""


class DataRace(RuntimeError):
    """Raised by the interpreter's race guard (races.py): plain stores of two programs of
    one launch to one address, which a GPU runs at once."""


def _chain(err: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = err
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _innermost_file(err: BaseException) -> str:
    frames = traceback.extract_tb(err.__traceback__)
    return frames[-1].filename if frames else ""


def _is_triton_compile_error(err: BaseException) -> bool:
    """Triton front-end / type / shape errors, compiled (GPU) or interpreted (CPU)."""
    names = {cls.__name__ for cls in type(err).__mro__}
    if names & {"CompilationError", "CompileTimeAssertionFailure", "OutOfResources",
                "UnsupportedLanguageConstruct"}:
        return True
    inner = _innermost_file(err).replace(os.sep, "/")
    return "/triton/language/" in inner or "/triton/compiler/" in inner


def candidate_location(err: BaseException, candidate_path: str) -> str | None:
    """``line 12: <code>`` of the deepest frame inside the candidate's file, if any."""
    found = None
    for link in _chain(err):
        for frame in traceback.extract_tb(link.__traceback__):
            if os.path.basename(frame.filename) == os.path.basename(candidate_path):
                found = f"line {frame.lineno}: {(frame.line or '').strip()}"
    return found


def classify_exception(err: BaseException, *, stage: str) -> tuple[str, str]:
    """(stage, error_kind) for an exception raised while the candidate loaded or ran."""
    chain = _chain(err)
    texts = " ".join(f"{type(e).__name__} {e}" for e in chain).lower()
    if any(isinstance(e, SyntaxError) for e in chain) and stage == "syntax":
        return "syntax", "syntax_error"
    if stage == "syntax":
        return "syntax", "import_error"
    if any(isinstance(e, NarrowAddress) for e in chain):
        return "compile", "compile_error"
    if any(isinstance(e, OutOfBoundsAccess) for e in chain):
        return "run", "illegal_memory_access"
    if any(isinstance(e, DataRace) for e in chain):  # a GPU's answer would be wrong
        return "correctness", "wrong_result"
    if any(isinstance(e, MemoryError) for e in chain) or any(t in texts for t in _OOM_TEXTS):
        return "run", "out_of_memory"
    if any(t in texts for t in _ILLEGAL_ACCESS_TEXTS):
        return "run", "illegal_memory_access"
    if any(type(e).__name__ == "OutOfResources" for e in chain):
        return "compile", "out_of_resources"  # e.g. more shared memory than a block may use
    if any(_is_triton_compile_error(e) for e in chain):
        return "compile", "compile_error"
    return "run", "runtime_error"


def exception_message(err: BaseException, candidate_path: str) -> str:
    """The innermost error text plus where in the candidate it happened, trimmed."""
    innermost = _chain(err)[-1]
    text = f"{type(innermost).__name__}: {innermost}"
    if isinstance(innermost, SyntaxError):
        text = f"SyntaxError: {innermost.msg} (line {innermost.lineno}: " \
               f"{(innermost.text or '').strip()})"
    elif type(innermost).__name__ == "CompilationError":
        text = trim_compiler_message(str(innermost))
    where = candidate_location(err, candidate_path)
    if where and where not in text:
        text = f"{text}\n  at {where}"
    return trim(text)


def trim_compiler_message(text: str, keep: int = 8) -> str:
    """Triton's CompilationError repeats the source; keep the marked line and the error."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    marker = next((i for i, ln in enumerate(lines) if ln.strip().startswith("^")), None)
    if marker is None:
        return "\n".join(lines[-keep:])
    return "\n".join(lines[max(0, marker - 2): marker + keep])


def trim(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 15] + " ... [trimmed]"


def classify_exit(returncode: int, stderr_tail: str) -> tuple[str, str, str]:
    """(stage, error_kind, message) for a worker that died without writing a result.
    A death by signal N reads -N, or 128 + N when it comes through the judge (the
    evaluation's entry process, which outlives the worker)."""
    if returncode > 128:
        returncode = -(returncode - 128)
    lowered = stderr_tail.lower()
    if any(t in lowered for t in _ILLEGAL_ACCESS_TEXTS):
        return "run", "illegal_memory_access", _last_lines(stderr_tail)
    if any(t in lowered for t in _OOM_TEXTS) or "memoryerror" in lowered:
        return "run", "out_of_memory", _last_lines(stderr_tail)
    if returncode == -signal.SIGKILL:
        return "run", "out_of_memory", "worker killed (SIGKILL), most likely out of memory"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = str(-returncode)
        kind = "illegal_memory_access" if returncode == -signal.SIGSEGV else "crash"
        return "run", kind, f"worker crashed with signal {name}\n{_last_lines(stderr_tail)}".strip()
    tail = _last_lines(stderr_tail)
    return "run", "crash", f"worker exited with code {returncode}\n{tail}".strip()


def _last_lines(text: str, count: int = 6) -> str:
    return trim("\n".join([ln for ln in text.splitlines() if ln.strip()][-count:]))
