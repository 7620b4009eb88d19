"""The LLM agent: any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, ...) via ``openai``.

The prompt (optimizer/prompts/*.txt) carries what the article's section 4.2 lists: task,
current best kernel, reference, feedback format, constraints, suggested directions,
retrieved few-shot experiences and reminders of invalid rounds. A reply that cannot be
used is a failed round, never a crash; transport errors are retried with backoff.
"""

from __future__ import annotations

import inspect
import logging
import re
import time
from dataclasses import dataclass

from kb.record import EDIT_CATEGORIES
from kernels.base import Task, header_constants
from optimizer.agents.base import AgentContext, Proposal
from optimizer.prompting import render

log = logging.getLogger(__name__)

_CODE_BLOCK = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)
_FIELD = re.compile(r"^\s*\**(CHANGE|WHY|CATEGORIES)\**\s*:\s*(.+?)\s*$", re.I | re.M)


@dataclass(frozen=True)
class LLMSettings:
    base_url: str | None
    model: str
    api_key: str | None = None
    temperature: float = 0.2
    max_tokens: int = 4096
    timeout_s: float = 120.0
    attempts: int = 4  # transport attempts per round
    backoff_s: float = 2.0  # first wait; doubles each retry


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
    changed = {p.category for p in (*task.knobs, *task.variants)
               if before.get(p.name) != after.get(p.name)}
    return tuple(sorted(changed)) or ("other",)


def _first_prose_line(reply: str) -> str | None:
    for line in _CODE_BLOCK.sub("", reply).splitlines():
        if line.strip() and not _FIELD.match(line):
            return line.strip()[:200]
    return None


def build_messages(context: AgentContext) -> list[dict[str, str]]:
    task = context.task
    tol = task.tolerances[context.dtype]
    system = render("system", signature=task.signature, atol=tol.atol, rtol=tol.rtol,
                    dtype=context.dtype, categories=", ".join(EDIT_CATEGORIES[1:]))
    directions = [f"- {v.name}: {v.help}" for v in task.variants]
    directions += [f"- {k.name} (one of {list(k.values)}){': ' + k.help if k.help else ''}"
                   for k in task.knobs]
    directions += [f"- {'predicted' if item.kind == 'predicted' else 'known'} configuration "
                   f"({item.evidence}"
                   + (f"; {item.version_note}" if item.version_note else "") + "): "
                   + ", ".join(f"{k}={v!r}" for k, v in sorted(item.config.items()))
                   for item in context.known_configs]
    reminders = context.reminders[-5:] or ["(none)"]
    predicted = [f"{item.rank}. " + ", ".join(f"{k}={v!r}" for k, v in sorted(item.config.items()))
                 + (f": predicted {item.predicted_rel_time:.2f}x the best"
                    if item.predicted_rel_time else "")
                 + (f" ({item.evidence[0]})" if item.evidence else "")
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
    """Asks the model for one edit per round; failures become failed proposals."""

    name = "llm"

    def __init__(self, settings: LLMSettings) -> None:
        import openai

        self._openai = openai
        self.settings = settings
        self.model: str | None = settings.model
        self._client = openai.OpenAI(base_url=settings.base_url,
                                     api_key=settings.api_key or "not-needed",
                                     timeout=settings.timeout_s, max_retries=0)
        self.last_messages: list[dict[str, str]] = []

    def propose(self, context: AgentContext) -> Proposal:
        self.last_messages = build_messages(context)
        reply, error = self._complete(self.last_messages)
        if reply is None:
            return Proposal(source=None, summary="no reply from the model",
                            claimed_gain=True, error=error or "no reply")
        return parse_reply(reply, context.task, context.best_source)

    def observe(self, proposal: Proposal, score: float | None, verdict: str) -> None:
        """The model learns through the next prompt (feedback, reminders), not here."""

    def _complete(self, messages: list[dict[str, str]]) -> tuple[str | None, str | None]:
        oa, cfg = self._openai, self.settings
        retryable = (oa.APIConnectionError, oa.APITimeoutError, oa.RateLimitError,
                     oa.InternalServerError)
        error = None
        for attempt in range(cfg.attempts):
            try:
                response = self._client.chat.completions.create(
                    model=cfg.model, messages=messages,  # type: ignore[arg-type]
                    temperature=cfg.temperature, max_tokens=cfg.max_tokens)
                content = response.choices[0].message.content if response.choices else None
                return (content or ""), None
            except retryable as err:
                error = f"{type(err).__name__}: {err}"
                wait = cfg.backoff_s * 2**attempt
                log.warning("LLM call failed (%s), attempt %d/%d; retrying in %.1fs",
                            error, attempt + 1, cfg.attempts, wait)
                if attempt + 1 < cfg.attempts:
                    time.sleep(wait)
            except oa.APIError as err:  # 4xx and the like: retrying will not help
                return None, f"{type(err).__name__}: {err}"
        return None, f"gave up after {cfg.attempts} attempts: {error}"
