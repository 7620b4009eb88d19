"""Weigh retrieved experiences as evidence for a candidate edit "set X to v".

An experience speaks for an edit when its diff set the same header constant to the same
value (exact evidence) or touched the same edit category (weaker, category evidence).
Its voice is weighted by how close it is: same op and hardware first, then the same op
elsewhere, then related ops, then the rest; and by what happened: a measured win counts
most, a verified-correct untimed edit a little, failures and wrong results count against.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from kernelkb.kb.record import ExperienceRecord
from kernelkb.kernels.base import Task
from kernelkb.kernels.config import ConfigValue
from kernelkb.kernels.dispatch_runtime import header_literal
from kernelkb.kernels.shared.vocabulary import Verdict

_ADDED_HEADER = re.compile(r"^\+([A-Z][A-Z0-9_]*)\s*=\s*(.+?)\s*(#.*)?$")

VERDICT_VALUE: dict[Verdict, float] = {
    Verdict.improved: 1.0, Verdict.neutral: 0.2, Verdict.regressed: -0.5,
    Verdict.incorrect: -1.0, Verdict.failed: -1.0, Verdict.invalid: -0.3,
}
CATEGORY_SHARE = 0.25  # how much a category-level vote counts against an exact one
CONTEXT_FLOOR = 0.3  # the weight of an experience whose other knobs all differ
CONTEXT_UNKNOWN = 0.6  # no knob in common to compare (another op, or a free-form edit)


def header_changes(diff: str) -> dict[str, ConfigValue]:
    """Header constants a unified diff sets (its ``+NAME = literal`` lines)."""
    found: dict[str, ConfigValue] = {}
    for line in diff.splitlines():
        if line.startswith("+++"):
            continue
        match = _ADDED_HEADER.match(line)
        if match:
            try:
                found[match.group(1)] = header_literal(match.group(2))
            except ValueError:
                continue
    return found


def relation_weight(record: ExperienceRecord, task: Task, arch: str) -> float:
    same_hw = record.env.arch == arch
    if record.task.op_type == task.op_type:
        return 1.0 if same_hw else 0.6
    if record.task.op_type in task.related_ops:
        return 0.4 if same_hw else 0.3
    return 0.15


def outcome_value(record: ExperienceRecord) -> float:
    value = VERDICT_VALUE[record.verdict]
    gain = record.feedback.speedup_vs_parent
    if record.verdict is Verdict.improved and gain is not None:
        value += min(1.0, max(0.0, gain - 1.0) * 5)  # a 20% win doubles the vote
    return value


@dataclass
class Evidence:
    score: float = 0.0
    ids: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, amount: float, record: ExperienceRecord, how: str) -> None:
        self.score += amount
        if record.id and record.id not in self.ids:
            self.ids.append(record.id)
            self.notes.append(f"{record.task.op_type}/{record.env.arch} {how} "
                              f"{record.verdict.value} [{record.id[:10]}]")


def context_weight(record: ExperienceRecord, config: dict[str, ConfigValue] | None,
                   param: str) -> float:
    """How alike the record's configuration is to the candidate's, apart from ``param``.

    A knob's effect depends on the others (8 warps help a whole-row softmax tile, not a
    1024-wide one), so "BLOCK_SIZE=1024 won" measured next to other settings speaks less
    for this candidate than the same edit measured in the same surroundings."""
    theirs = record.edit.config or {}
    if config is None:
        return CONTEXT_UNKNOWN
    shared = [k for k in theirs if k != param and k in config]
    if not shared:
        return CONTEXT_UNKNOWN
    share = sum(theirs[k] == config[k] for k in shared) / len(shared)
    return CONTEXT_FLOOR + (1.0 - CONTEXT_FLOOR) * share


def weigh(records: Iterable[ExperienceRecord], task: Task, arch: str,
          param: str, value: ConfigValue, category: str,
          config: dict[str, ConfigValue] | None = None) -> Evidence:
    """Evidence for setting ``param`` to ``value`` (an edit of ``category``); ``config``:
    the candidate's whole configuration, for the context weight."""
    evidence = Evidence()
    for record in records:
        if "baseline" in record.edit.categories:
            continue
        vote = relation_weight(record, task, arch) * outcome_value(record) * \
            context_weight(record, config, param)
        changes = header_changes(record.edit.diff)
        if changes.get(param) == value and type(changes[param]) is type(value):
            evidence.add(vote, record, f"set {param}={value!r}:")
        elif category in record.edit.categories:
            evidence.add(CATEGORY_SHARE * vote, record, f"{category}:")
    return evidence
