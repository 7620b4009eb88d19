"""The LLM agent: any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, ...) via ``openai``.

The prompt (optimizer/prompts/*.txt) carries what the article's section 4.2 lists: task,
current best kernel, reference, feedback format, constraints, suggested directions,
retrieved few-shot experiences and reminders of invalid rounds.

A reply that cannot be used is a failed round, never a crash: no code, a body that is
not a chat completion (a proxy's HTML page, cut-off JSON), no answer within the timeout
(llm_endpoint.py says each in one sentence). ``MISCONFIGURED`` replies in a row without
code say the model looks misconfigured; ``SILENT_ROUNDS`` rounds in a row without any
answer stop the run with its report. The endpoint itself failing is not a round: down,
refusing the key or the model, or rate-limited or erroring through the client's retries,
it raises ``AgentUnavailable``; ``preflight`` asks once before the run starts, so such a
run stores nothing.
"""

from __future__ import annotations

import inspect
import logging
import re
from dataclasses import replace
from typing import Any

from kernelkb.kernels.base import Task
from kernelkb.kernels.config import header_constants
from kernelkb.kernels.shared.vocabulary import EDIT_CATEGORIES, ProposalKind
from kernelkb.optimizer.agents.base import AgentContext, AgentUnavailable, Proposal
from kernelkb.optimizer.agents.llm_endpoint import (
    Endpoint,
    LLMSettings,
    NoAnswer,
    Silence,
)
from kernelkb.optimizer.prompting import render
from kernelkb.retrieval.first_try import time_vs_best
from kernelkb.retrieval.quoting import NAME_CHARS, inline

log = logging.getLogger(__name__)

_CODE_BLOCK = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)
_FIELD = re.compile(r"^\s*\**(CHANGE|WHY|CATEGORIES)\**\s*:\s*(.+?)\s*$", re.I | re.M)


MISCONFIGURED = 3  # replies in a row without code before the model is called misconfigured
SILENT_ROUNDS = 3  # rounds in a row with no answer at all before the run stops
PREDICTED_SHOWN = 5  # the ranker's first configurations shown to the model, as a hint


def extract_code(reply: str) -> str | None:
    """The last fenced block that defines run(...); a bare module is accepted too."""
    blocks = [body for lang, body in _CODE_BLOCK.findall(reply)
              if lang.lower() in ("", "python", "py", "python3")]
    for body in reversed(blocks):
        if "def run(" in body:
            return body.strip("\n") + "\n"
    stripped = reply.strip()
    if not blocks and "def run(" in stripped and stripped.startswith(("import", "from", '"""')):
        return stripped + "\n"
    return None


def parse_reply(reply: str, task: Task, parent_source: str) -> Proposal:
    """Turn a reply into a Proposal; an unusable one carries ``error`` and no source."""
    source = extract_code(reply)
    if source is None:
        return Proposal(source=None, summary="unusable reply: no python code block with run()",
                        categories=("other",), claimed_gain=True, raw=reply,
                        error="the reply had no ```python block defining run(...)")
    fields = {m.group(1).upper(): m.group(2) for m in _FIELD.finditer(_CODE_BLOCK.sub("", reply))}
    summary = fields.get("CHANGE") or _first_prose_line(reply) or "unspecified change"
    if fields.get("WHY"):
        summary = f"{summary} (why: {fields['WHY']})"
    categories = [c.strip().lower() for c in fields.get("CATEGORIES", "").split(",")]
    known = tuple(c for c in categories if c in EDIT_CATEGORIES and c != "baseline")
    return Proposal(source=source, summary=summary[:500],
                    categories=known or infer_categories(task, parent_source, source),
                    claimed_gain=True, raw=reply)


def infer_categories(task: Task, parent: str, child: str) -> tuple[str, ...]:
    """Categories of the task parameters whose header value changed, else 'other'."""
    before, after = header_constants(parent), header_constants(child)
    changed = {p.category for p in task.params if before.get(p.name) != after.get(p.name)}
    return tuple(sorted(changed)) or ("other",)


def _first_prose_line(reply: str) -> str | None:
    for line in _CODE_BLOCK.sub("", reply).splitlines():
        if line.strip() and not _FIELD.match(line):
            return line.strip()[:200]
    return None


def _config_text(config: dict[str, Any]) -> str:
    return ", ".join(f"{inline(k, NAME_CHARS)}={inline(repr(v), NAME_CHARS)}"
                     for k, v in sorted(config.items()))


def build_messages(context: AgentContext) -> list[dict[str, str]]:
    task = context.task
    tol = task.tolerances[context.dtype]
    system = render("system", signature=task.signature, atol=tol.atol, rtol=tol.rtol,
                    dtype=context.dtype, categories=", ".join(EDIT_CATEGORIES[1:]))
    directions = [f"- {v.name}: {v.help}" for v in task.variants]
    directions += [f"- {k.name} (one of {list(k.values)}){': ' + k.help if k.help else ''}"
                   for k in task.knobs]
    # every stored field below (GPU names in the evidence, configuration keys and values)
    # is quoted as the retrieved block is: a store writer must not open a turn here either
    label = {"predicted": "predicted", "related": "a related op's best"}
    directions += [f"- {label.get(item.kind, 'known')} configuration "
                   f"({inline(item.evidence)}"
                   + (f"; {inline(item.version_note)}" if item.version_note else "") + "): "
                   + _config_text(item.config)
                   for item in context.known_configs]
    reminders = context.reminders[-5:] or ["(none)"]
    predicted = [f"{item.rank}. " + _config_text(item.config)
                 + (": predicted " + time_vs_best(item.predicted_rel_time, "the best per shape")
                    if item.predicted_rel_time else "")
                 + (f" ({inline(item.evidence[0])})" if item.evidence else "")
                 for item in context.predicted[:PREDICTED_SHOWN]]
    user = render(
        "round", task_name=task.name, op_type=task.op_type, dtype=context.dtype,
        description=task.description, iteration=context.iteration,
        round_kind=context.round_kind, best_source=context.best_source.rstrip(),
        reference_source=_reference_source(task), best_feedback=context.best_feedback or
        "(none yet)", last_feedback=context.last_feedback or "(first round)",
        directions="\n".join(directions) or "(none)",
        few_shot=context.few_shot or "(no experiences retrieved)",
        predicted="\n".join(predicted) or "(none: this GPU has measurements of the task, or "
        "nothing elsewhere to learn from)",
        reminders="\n".join(f"- {r}" for r in reminders),
        round_instruction=render("explore" if context.round_kind == "explore" else "exploit"),
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _reference_source(task: Task) -> str:
    try:
        return inspect.getsource(task.reference).rstrip()
    except (OSError, TypeError):
        return f"# (source unavailable) {task.reference!r}"


class LLMAgent:
    """Asks the model for one edit per round. A reply that cannot be used, or none within
    the timeout, is a failed round; an endpoint that fails is AgentUnavailable (the run
    stops with its report; see the module docstring)."""

    name = "llm"
    fixed_round_kind: ProposalKind | None = None  # the policy's exploit / explore schedule

    def __init__(self, settings: LLMSettings) -> None:
        self.settings = settings
        self.model: str | None = settings.model
        self._endpoint = Endpoint(settings)
        self.last_messages: list[dict[str, str]] = []
        self._reachable = False  # preflight passed
        self._without_code = 0  # replies in a row without code
        self._silent = 0  # rounds in a row the endpoint gave no answer at all

    @property
    def endpoint(self) -> str:
        return self._endpoint.url

    def preflight(self) -> None:
        """Ask the endpoint for its models once, before the run: down, a refused key or an
        answer that is not the API raise AgentUnavailable before anything is stored. An
        endpoint that lists no models (404/405/501) is taken as reachable."""
        if self._reachable:
            return
        listed = self._endpoint.list_models()
        self._reachable = True
        if listed and self.settings.model not in listed:
            log.warning("model %r is not among those %s lists (%s); asking anyway",
                        self.settings.model, self.endpoint, ", ".join(listed[:10]))

    def propose(self, context: AgentContext) -> Proposal:
        self.last_messages = build_messages(context)
        try:
            reply, finish = self._endpoint.complete(self.last_messages)
        except NoAnswer as err:
            self._silent = self._silent + 1 if isinstance(err, Silence) else 0
            if self._silent >= SILENT_ROUNDS:
                raise AgentUnavailable(f"{err}; {self._silent} rounds in a row without an "
                                       "answer: stopping the run") from err
            proposal = Proposal(source=None, summary=f"no usable reply: {err}",
                                categories=("other",), error=str(err))
        else:
            self._silent = 0
            proposal = parse_reply(reply, context.task, context.best_source)
            if proposal.source is None and finish == "length":  # why it has no whole block
                error = (f"the reply was cut off at max_tokens ({self.settings.max_tokens}) "
                         "before a whole ```python block defining run(...)")
                proposal = replace(proposal, error=error, summary=f"unusable reply: {error}")
        self._count(proposal)
        return proposal

    def observe(self, proposal: Proposal, score: float | None, verdict: str) -> None:
        """The model learns through the next prompt (feedback, reminders), not here."""

    def _count(self, proposal: Proposal) -> None:
        """After MISCONFIGURED replies in a row without code, say once what to check."""
        self._without_code = 0 if proposal.source is not None else self._without_code + 1
        if self._without_code == MISCONFIGURED:
            log.warning("%d replies in a row without code from model %r at %s: the model "
                        "looks misconfigured (check --model, --base-url and that it is a "
                        "chat model that writes code; each round's line says what came)",
                        MISCONFIGURED, self.settings.model, self.endpoint)
