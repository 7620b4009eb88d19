"""Render hits and warnings as a few-shot prompt block within a character budget.

Whole entries are dropped from the end rather than cut mid-sentence; diffs are clipped
first because they are the longest part, but never below their first changed lines
(``MIN_DIFF_LINES``) while one entry fits with them; the most compact form keeps an
entry's head (with its id prefix) and edit only. Wins come first, then neutral entries
under their own heading (a 1.01x within noise is no win), then losses. A diff shows its
changed lines only
(the file header and context lines say nothing a reader needs, and a diff cut to its
first lines was all header). About 4 characters make one token.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from cachetools import LRUCache

from kernelkb.retrieval.quoting import WRAP_CHARS, code_line, inline, wrap
from kernelkb.retrieval.schemas import Hit

CHARS_PER_TOKEN = 4
_DIFF_LINES = 14
MIN_DIFF_LINES = 2  # a removed and an added line: below this, entries drop from the end
RELATED_HEAD = ("From related ops (this op's own experiences ran out; they may not carry "
                "over):")
LEGEND = ("(speedup vs parent: over the kernel the edit changed; vs baseline: over the "
          "task's PyTorch reference run eagerly on the same GPU and shapes; >1x is faster)")

LEGEND_AT_TOP_CHARS = 1000  # below this budget the legend goes last, if it fits
ID_CHARS = 10  # an id prefix `kernelkb show` and GET /experiences/ID take
SHAPES_SHOWN = 2  # shape labels named per entry
WORKED_HEAD = "Past experiences that worked (most useful first; measured > claimed):"
LOST_HEAD = "Tried here and lost (avoid repeating these):"
NEUTRAL_HEAD = "Tried with no clear gain (neutral: within noise, or untimed):"


def changed_lines(diff: str) -> list[str]:
    """The removed and added lines of a unified diff, hunks separated by '...'; without
    the ---/+++ file header, the @@ hunk headers and unchanged context. Text that is not
    a unified diff (no @@ hunk: hand-written, imported) is shown line by line as it is."""
    if not any(line.startswith("@@") for line in diff.splitlines()):
        return [line for line in diff.splitlines() if line.strip()]
    out: list[str] = []
    gap = False
    for line in diff.splitlines():
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("@@"):
            gap = bool(out)
            continue
        if line.startswith(("+", "-")):
            if gap:
                out.append("...")
                gap = False
            out.append(line)
    return out


def _speed(hit: Hit) -> str:
    fb = hit.record.feedback
    parts = []
    if fb.speedup_vs_parent is not None:
        parts.append(f"{fb.speedup_vs_parent:.2f}x vs parent")
    if fb.speedup_vs_baseline is not None:
        parts.append(f"{fb.speedup_vs_baseline:.2f}x vs baseline")
    return ", ".join(parts) or "no timing"


def _shapes(hit: Hit) -> str:
    """The shapes the figures are from (the timings'), else the task's shape set."""
    labels = list(dict.fromkeys(t.shape for t in hit.record.feedback.timings))
    if not labels:
        return f"shape set {inline(hit.record.task.shape_set, 80)}"
    more = f" (+{len(labels) - SHAPES_SHOWN} more)" if len(labels) > SHAPES_SHOWN else ""
    return "timed on " + "; ".join(inline(s, 60) for s in labels[:SHAPES_SHOWN]) + more


def _worked(hit: Hit) -> bool:
    return hit.record.verdict.value == "improved"


def _repeated(hit: Hit) -> bool:
    return hit.support > 1 and hit.record.verdict.value == "improved"


_RENDERED_KEPT = 4096
_rendered: LRUCache[tuple[object, ...], str] = LRUCache(_RENDERED_KEPT)  # cachetools
_rendered_lock = threading.Lock()


def render_hit(n: int, hit: Hit, diff_lines: int = _DIFF_LINES) -> str:
    """``[n]`` and the entry. The entry depends only on the record (its id is a content
    hash) and the hit's labels, and quoting it cost ~2 ms a hit under load, so each
    rendering is kept (a few thousand, least recently used dropped)."""
    key = (hit.id, hit.related, hit.version_note, hit.evidence,
           hit.support if _repeated(hit) else 0, diff_lines)
    with _rendered_lock:
        body = _rendered.get(key)
    if body is None:
        body = _render_entry(hit, diff_lines)
        with _rendered_lock:
            _rendered[key] = body
    return f"[{n}] {body}"


def _render_entry(hit: Hit, diff_lines: int) -> str:
    r = hit.record
    q = inline  # every stored field is quoted data (retrieval/quoting.py)
    relation = f"(related op {q(r.task.op_type, 60)}, not this task's) " if hit.related else ""
    head = (f"{relation}{q(r.task.op_type, 60)}/{q(r.task.task_id, 60)} "
            f"{q(r.task.dtype, 60)} on {q(r.env.gpu_name, 60)} ({q(r.env.arch, 60)}, triton "
            f"{q(r.env.triton_version, 60)}) | {r.verdict.value}, {_speed(hit)} "
            f"| {hit.evidence}" + (f", {hit.support} similar wins" if _repeated(hit) else "")
            + f" | id {q((hit.id or '')[:ID_CHARS], 40)}")
    lines = [head] + ([f"    {_shapes(hit)}"] if diff_lines else []) + [
        f"    edit [{', '.join(r.edit.categories)}]: {q(r.edit.summary)}"]
    if hit.version_note:
        lines.append(f"    note: {q(hit.version_note, 160)}, re-check before trusting its "
                     "speed")
    if r.edit.config and diff_lines:  # the most compact form: head and edit only
        lines.append("    config: " + ", ".join(f"{q(k, 60)}={q(v, 60)}"
                                               for k, v in list(r.edit.config.items())[:16]))
    fb = r.feedback
    if fb.error_kind:
        lines.append(f"    error: {q(fb.error_kind, 60)}: {q(fb.error_message or '', 160)}")
    if fb.bottleneck_hint:
        lines.append(f"    hint: {q(fb.bottleneck_hint)}")
    diff = changed_lines(r.edit.diff) if r.edit.diff and diff_lines else []
    if diff:
        shown = [code_line(d) for d in diff[:diff_lines]] + (
            [f"... ({len(diff) - diff_lines} more changed lines)"]
            if len(diff) > diff_lines else [])
        lines.append("    changed lines:\n" + "\n".join("      " + d for d in shown))
    return "\n".join(lines)


def render_block(hits: Sequence[Hit], warnings: Sequence[Hit], max_chars: int) -> str:
    """The block, at most ``max_chars`` long, delimited as quoted data."""
    wanted = len(hits) + len(warnings)
    for diff_lines in (_DIFF_LINES, 6, MIN_DIFF_LINES):  # fewer changed lines each, first
        block, shown = _assemble(hits, warnings, max_chars - WRAP_CHARS, diff_lines)
        if shown == wanted:
            break
    if not shown:  # not even one entry with its changed lines: entries without them
        block, shown = _assemble(hits, warnings, max_chars - WRAP_CHARS, 0)
    return wrap(block) if wanted else block


def _assemble(
    hits: Sequence[Hit], warnings: Sequence[Hit], max_chars: int, diff_lines: int
) -> tuple[str, int]:
    out: list[str] = []
    shown = 0
    used = 0

    def add(chunk: str) -> bool:
        nonlocal used
        if used + len(chunk) + 1 > max_chars:
            return False
        out.append(chunk)
        used += len(chunk) + 1
        return True

    if not hits and not warnings:
        return "No past experiences match this op and hardware yet."[:max_chars], 0
    legend_first = max_chars >= LEGEND_AT_TOP_CHARS
    if legend_first:
        add(LEGEND)
    worked = [h for h in hits if _worked(h)]
    neutral = [h for h in hits if not _worked(h)]
    groups = ((WORKED_HEAD, worked, diff_lines), (NEUTRAL_HEAD, neutral, diff_lines),
              (LOST_HEAD, list(warnings), min(diff_lines, 4)))
    for head, group, lines in groups:  # once an entry does not fit, none after it is added
        if group and not add(head):
            break
        for i, hit in enumerate(group):
            if hit.related and not (i and group[i - 1].related) and not add(RELATED_HEAD):
                break
            if not add(render_hit(shown + 1, hit, lines)):
                break
            shown += 1
        else:
            continue
        break
    if not legend_first:  # a small budget: the entries first, the legend where it fits
        add(LEGEND)
    return "\n".join(out), shown
