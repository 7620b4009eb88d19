"""What an agent sees (``AgentContext``) and what it returns (``Proposal``).

Every agent, scripted LLM or offline catalog, answers the same question: given the
current best kernel, its feedback, the experiences retrieved for this task and the
reminders of earlier invalid rounds, what is the ONE next edit to try? Keeping the
interface this small lets the loop, the policy and the tests ignore which agent runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from kernelkb.kb.record import ExperienceRecord
from kernelkb.kernels.base import Task
from kernelkb.kernels.config import ConfigValue, header_constants
from kernelkb.kernels.shared.hashing import source_hash
from kernelkb.kernels.shared.vocabulary import EDIT_CATEGORIES, ProposalKind


@dataclass(frozen=True)
class RoundNote:
    """One earlier round, as later rounds and prompts remember it."""

    iteration: int
    summary: str
    categories: tuple[str, ...]
    verdict: str
    config: dict[str, ConfigValue]
    changes: dict[str, ConfigValue] = field(default_factory=dict)  # header values it set
    time_ms: float | None = None
    message: str | None = None  # why it failed or was invalid, told to the agent


@dataclass
class AgentContext:
    task: Task
    dtype: str
    iteration: int
    round_kind: ProposalKind
    best_source: str
    best_feedback: str = ""
    last_feedback: str = ""
    history: list[RoundNote] = field(default_factory=list)
    tried_hashes: set[str] = field(default_factory=set)
    reminders: list[str] = field(default_factory=list)  # invalid / failed rounds to avoid
    few_shot: str = ""  # the retrieved experiences, rendered for a prompt
    experiences: list[ExperienceRecord] = field(default_factory=list)
    insights: list[dict[str, Any]] = field(default_factory=list)
    known_configs: list[Any] = field(default_factory=list)  # best measured configs (PlanItem)
    # the learned ranker's order of the task's configurations (retrieval RankedItem), when
    # this GPU has no measurement of the task: a hint, not a measurement
    predicted: list[Any] = field(default_factory=list)
    gpu_arch: str = "cpu"
    # the shapes the run tunes (one regime's) and the GPU's SM count: what launch-shape
    # moves are judged on (optimizer/agents/launch_shape.py); empty / None: not judged
    shapes: list[tuple[int, ...]] = field(default_factory=list)
    sm_count: int | None = None

    @property
    def best_config(self) -> dict[str, ConfigValue]:
        """The task parameters as the best kernel's header sets them."""
        header = header_constants(self.best_source)
        names = [p.name for p in self.task.params]
        return {**self.task.default_config, **{n: header[n] for n in names if n in header}}


@dataclass(frozen=True)
class Proposal:
    """One candidate edit. ``source is None`` means the agent produced nothing usable."""

    source: str | None
    summary: str
    categories: tuple[str, ...] = ("other",)
    claimed_gain: bool = False  # the agent says it is faster (checked against the timing)
    rationale: str = ""  # why this edit now: evidence, exploration, search state
    error: str | None = None  # why the reply was unusable
    raw: str = ""  # the agent's raw reply, for the logs

    def __post_init__(self) -> None:
        unknown = set(self.categories) - set(EDIT_CATEGORIES)
        if unknown:
            raise ValueError(f"unknown categories {sorted(unknown)}")
        if self.source is None and not self.error:
            raise ValueError("a proposal without source must say why (error)")


class SearchExhausted(Exception):
    """The agent has nothing left to try: the loop stops with reason 'exhausted'."""


class AgentUnavailable(RuntimeError):
    """The machinery behind the agent failed (an LLM endpoint down, a key refused, rate
    limits past the retries): not an experience. The run stops; nothing is recorded for
    the round that could not be asked."""


class Agent(Protocol):
    name: str
    model: str | None
    # the kind of every round this agent runs (the tuner's "tune"), or None: the
    # policy's schedule of exploit and explore rounds
    fixed_round_kind: ProposalKind | None

    def preflight(self) -> None:
        """Check, before the run, what the agent needs (an LLM endpoint); raises
        AgentUnavailable so a run that cannot ask stores nothing. Once is enough: a
        second call returns at once."""
        ...

    def propose(self, context: AgentContext) -> Proposal: ...

    def observe(self, proposal: Proposal, score: float | None, verdict: str) -> None:
        """Learn from the outcome of a proposal (the tuner's search uses it)."""
        ...


def propose_batch(agent: Agent, context: AgentContext, count: int) -> list[Proposal]:
    """Up to ``count`` different proposals for one round on as many GPUs: each asked with
    the earlier ones counted as tried and named in a reminder, so the offline agent gives
    its next-best moves, the tuner its next configurations and an LLM a different edit.
    Fewer come back when the agent runs out or repeats itself; none raises as
    ``propose`` would (SearchExhausted)."""
    proposals: list[Proposal] = []
    tried = set(context.tried_hashes)
    for _ in range(count):
        asked = replace(context, tried_hashes=set(tried), reminders=[
            *context.reminders, *(f"another GPU already measures this round: {p.summary}; "
                                  "propose a different edit" for p in proposals)])
        try:
            proposal = agent.propose(asked)
        except SearchExhausted:
            if proposals:
                break
            raise
        if proposal.source is not None:
            made = source_hash(proposal.source)
            if made in tried:
                break  # the agent has nothing different left: a smaller batch
            tried.add(made)
        proposals.append(proposal)
    return proposals
