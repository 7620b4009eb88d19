"""The LLM agent: any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, ...) via ``openai``.

The prompt (optimizer/prompts/*.txt) carries what the article's section 4.2 lists: task,
current best kernel, reference, feedback format, constraints, suggested directions,
retrieved few-shot experiences and reminders of invalid rounds. A reply that cannot be
used is a failed round, never a crash. The endpoint itself failing is not a round: an
endpoint that is down, refuses the key or the model, or stays rate-limited or erroring
through ``attempts`` tries (waits of ``backoff_s`` doubling, at most ``MAX_WAIT_S`` each,
a server's Retry-After heeded up to that) raises ``AgentUnavailable`` with what failed;
``preflight`` asks once before the run starts, so such a run stores nothing.
"""

from __future__ import annotations

import inspect
import logging
import re
import time
from dataclasses import dataclass
from typing import Any

from kernelkb.kernels.base import Task, header_constants
from kernelkb.kernels.shared.vocabulary import EDIT_CATEGORIES, ProposalKind
from kernelkb.optimizer.agents.base import AgentContext, AgentUnavailable, Proposal
from kernelkb.optimizer.prompting import render
from kernelkb.retrieval.quoting import NAME_CHARS, inline

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
    timeout_s: float = 120.0  # one reply may take this long
    connect_timeout_s: float = 10.0  # an endpoint that does not answer at all fails fast
    attempts: int = 3  # tries per request when the endpoint is down, rate-limits or errs
    backoff_s: float = 1.0  # first wait; doubles each retry (1 + 2 s by default)


MAX_WAIT_S = 30.0  # longest single wait between tries, Retry-After included
_NO_LISTING = (404, 405, 501)  # an endpoint without GET /models: reachable, nothing to list


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
                 + (f": predicted {item.predicted_rel_time:.2f}x the best"
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
    """Asks the model for one edit per round; an unusable reply is a failed round, an
    endpoint that fails is AgentUnavailable (the run stops; see the module docstring)."""

    name = "llm"
    fixed_round_kind: ProposalKind | None = None  # the policy's exploit / explore schedule

    def __init__(self, settings: LLMSettings) -> None:
        import httpx
        import openai

        self._openai = openai
        self.settings = settings
        self.model: str | None = settings.model
        timeout = httpx.Timeout(settings.timeout_s, connect=settings.connect_timeout_s)
        self._client = openai.OpenAI(base_url=settings.base_url,
                                     api_key=settings.api_key or "not-needed",
                                     # openai >= 3 types its timeout as httpx2's Timeout
                                     # and converts an httpx one (openai/_httpx2.py)
                                     timeout=timeout,  # type: ignore[arg-type]
                                     max_retries=0)
        self.last_messages: list[dict[str, str]] = []
        self._reachable = False  # preflight passed

    @property
    def endpoint(self) -> str:
        return str(self._client.base_url).rstrip("/")

    def preflight(self) -> None:
        """Ask the endpoint for its models once, before the run: down, a refused key or
        rate limits past the retries raise AgentUnavailable before anything is stored.
        An endpoint that lists no models (404/405/501) is taken as reachable."""
        if self._reachable:
            return
        oa = self._openai
        try:
            listed = self._call(lambda: [m.id for m in self._client.models.list()],
                                "listing the models", at_once=_NO_LISTING)
        except AgentUnavailable as err:
            status = getattr(err.__cause__, "status_code", None)
            if isinstance(err.__cause__, oa.APIStatusError) and status in _NO_LISTING:
                self._reachable = True
                return
            raise
        self._reachable = True
        if listed and self.settings.model not in listed:
            log.warning("model %r is not among those %s lists (%s); asking anyway",
                        self.settings.model, self.endpoint, ", ".join(listed[:10]))

    def propose(self, context: AgentContext) -> Proposal:
        self.last_messages = build_messages(context)
        reply = self._complete(self.last_messages)
        return parse_reply(reply, context.task, context.best_source)

    def observe(self, proposal: Proposal, score: float | None, verdict: str) -> None:
        """The model learns through the next prompt (feedback, reminders), not here."""

    def _complete(self, messages: list[dict[str, str]]) -> str:
        cfg = self.settings

        def ask() -> str:
            response = self._client.chat.completions.create(
                model=cfg.model, messages=messages,  # type: ignore[arg-type]
                temperature=cfg.temperature, max_tokens=cfg.max_tokens)
            content = response.choices[0].message.content if response.choices else None
            return content or ""

        return self._call(ask, "asking for an edit")

    def _call(self, request: Any, what: str, at_once: tuple[int, ...] = ()) -> Any:
        """``request()`` with bounded retries of what may pass (connection, timeout, 429,
        5xx); AgentUnavailable at once for what will not (401, 403, 404, 400) and for
        the statuses in ``at_once``."""
        oa, cfg = self._openai, self.settings
        retryable = (oa.APIConnectionError, oa.RateLimitError, oa.InternalServerError)
        began = time.monotonic()
        for attempt in range(1, cfg.attempts + 1):
            try:
                return request()
            except retryable as err:
                problem = _describe(err)
                if attempt == cfg.attempts or getattr(err, "status_code", None) in at_once:
                    raise AgentUnavailable(
                        f"the LLM endpoint {self.endpoint} failed while {what}: {problem}; "
                        f"gave up after {cfg.attempts} attempts in "
                        f"{time.monotonic() - began:.1f} s (nothing was recorded for this "
                        "round)") from err
                wait = min(MAX_WAIT_S, max(cfg.backoff_s * 2 ** (attempt - 1),
                                           _retry_after(err)))
                log.warning("LLM endpoint %s: %s; attempt %d/%d, retrying in %.1f s",
                            self.endpoint, problem, attempt, cfg.attempts, wait)
                time.sleep(wait)
            except oa.APIError as err:  # 4xx: retrying will not help
                raise AgentUnavailable(
                    f"the LLM endpoint {self.endpoint} refused {what}: {_describe(err)}"
                    f"{_hint(err)} (not retried; nothing was recorded for this round)"
                ) from err
        raise AssertionError("unreachable")


def _describe(err: Exception) -> str:
    status = getattr(err, "status_code", None)
    message = str(getattr(err, "message", "") or err).strip().splitlines()
    text = message[0][:300] if message else type(err).__name__
    if status is not None:
        return f"HTTP {status} ({type(err).__name__}): {text}"
    cause = err.__cause__ or err.__context__
    return f"{type(err).__name__}: {text}" + (f" ({cause})" if cause else "")


def _hint(err: Exception) -> str:
    status = getattr(err, "status_code", None)
    if status in (401, 403):
        return "; check KERNELKB_LLM_API_KEY (or OPENAI_API_KEY)"
    if status == 404:
        return "; check KERNELKB_LLM_BASE_URL and the model name (--model)"
    return ""


def _retry_after(err: Exception) -> float:
    """Seconds a 429 or 503 response asks to wait (Retry-After), else 0."""
    response = getattr(err, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return max(0.0, float(value)) if value else 0.0
    except ValueError:
        return 0.0
