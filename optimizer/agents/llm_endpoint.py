"""One OpenAI-compatible endpoint, asked through the ``openai`` client: what it answered,
or one sentence saying why there is no answer.

Why its own module: a real endpoint answers more than chat completions. A proxy sends
its HTML error page with status 200 (the client hands back a ``str``), a server killed
mid-reply leaves cut-off JSON (the client raises ``JSONDecodeError``), a stuck one never
answers. Each became a traceback that left the run without its report. Here every
answer is read from the raw body, so each of them is one sentence:

- ``NoAnswer``: the endpoint is up but gave nothing usable this time (an unusable body;
  ``Silence``: no answer within ``timeout_s``, or the connection dropped); the agent
  turns it into a failed round.
- ``AgentUnavailable``: down, refused (4xx), or rate-limited / failing (429, 5xx) after
  the client's own retries (``retries``, its backoff and Retry-After); the run stops.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from typing import Any

from kernelkb.optimizer.agents.base import AgentUnavailable


@dataclass(frozen=True)
class LLMSettings:
    base_url: str | None
    model: str
    api_key: str | None = None
    temperature: float = 0.2
    max_tokens: int = 4096
    timeout_s: float = 120.0  # one reply may take this long (--llm-timeout-s)
    connect_timeout_s: float = 10.0  # an endpoint that does not answer at all fails fast
    retries: int = 2  # the openai client's retries of a failed request (--llm-retries)

    def __post_init__(self) -> None:
        if self.timeout_s <= 0 or self.connect_timeout_s <= 0:
            raise ValueError("--llm-timeout-s: must be above 0")
        if self.retries < 0:
            raise ValueError("--llm-retries: must be 0 or more")


class NoAnswer(Exception):
    """The endpoint answered nothing usable to one request (the message says what)."""


class Silence(NoAnswer):
    """Nothing came back at all: no answer within the timeout, or a dropped connection."""


NO_LISTING = (404, 405, 501)  # an endpoint without GET /models: reachable, nothing to list
_CONNECT_FAILURES = ("ConnectError", "ConnectTimeout")  # the transport's class names
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>|<h1[^>]*>(.*?)</h1>", re.I | re.S)
_TAGS = re.compile(r"<[^>]+>")


class Endpoint:
    """The openai client with our timeouts and its own retries; see the module doc."""

    def __init__(self, settings: LLMSettings) -> None:
        import openai

        self._openai = openai
        self.settings = settings
        # the client's own Timeout class: its HTTP library changed under it (httpx, then
        # httpx2 from openai 3.63), and it refuses the other's
        timeout = openai.Timeout(settings.timeout_s, connect=settings.connect_timeout_s)
        self._client = openai.OpenAI(base_url=settings.base_url,
                                     api_key=settings.api_key or "not-needed",
                                     timeout=timeout, max_retries=settings.retries)

    @property
    def url(self) -> str:
        return str(self._client.base_url).rstrip("/")

    def list_models(self) -> list[str] | None:
        """The models the endpoint lists, None when it has no listing (404/405/501).
        Asked once, without retries: a run that cannot start should say so at once."""
        client = self._client.with_options(max_retries=0)
        try:
            raw = self._ask(lambda: client.models.with_raw_response.list(), "listing the models",
                            attempts=1)
        except AgentUnavailable as err:
            if getattr(err.__cause__, "status_code", None) in NO_LISTING:
                return None
            raise
        except NoAnswer as err:
            raise AgentUnavailable(f"{err}; is --base-url the API's address (it usually "
                                   "ends in /v1)? (nothing was recorded)") from err
        payload = _json_body(raw.http_response, "listing the models", self.url)
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list):
            raise AgentUnavailable(f"the LLM endpoint {self.url} answered listing the models "
                                   "with JSON that is not a model list; is --base-url the "
                                   "API's address (it usually ends in /v1)?")
        return [str(m.get("id")) for m in data if isinstance(m, dict) and m.get("id")]

    def complete(self, messages: list[dict[str, str]]) -> tuple[str, str | None]:
        """The reply's text ("" for an empty message) and its finish_reason ("length": cut
        at max_tokens); NoAnswer or AgentUnavailable."""
        cfg = self.settings
        raw = self._ask(lambda: self._client.chat.completions.with_raw_response.create(
            model=cfg.model, messages=messages,  # type: ignore[arg-type]
            temperature=cfg.temperature, max_tokens=cfg.max_tokens), "asking for an edit",
            attempts=cfg.retries + 1)
        return reply_text(_json_body(raw.http_response, "asking for an edit", self.url),
                          self.url)

    def _ask(self, request: Any, what: str, *, attempts: int) -> Any:
        oa, cfg = self._openai, self.settings
        tries = f"{attempts} attempt{'s' if attempts > 1 else ''}"
        try:
            return request()
        except oa.APITimeoutError as err:
            if _connect_failure(err):
                raise AgentUnavailable(
                    f"the LLM endpoint {self.url} could not be reached while {what}: no "
                    f"connection within {cfg.connect_timeout_s:g} s ({tries}; nothing was "
                    "recorded for this round)") from err
            raise Silence(f"the LLM endpoint {self.url} gave no answer within "
                           f"{cfg.timeout_s:g} s while {what} ({tries}; --llm-timeout-s "
                           "sets the wait)") from err
        except oa.APIConnectionError as err:
            if not _connect_failure(err):  # connected, then nothing (a dropped reply)
                raise Silence(f"the LLM endpoint {self.url} closed the connection without "
                               f"an answer while {what} ({tries}): {_cause(err)}") from err
            raise AgentUnavailable(
                f"the LLM endpoint {self.url} failed while {what}: {_describe(err)}; gave "
                f"up after {tries} (nothing was recorded for this round)") from err
        except (oa.RateLimitError, oa.InternalServerError) as err:
            raise AgentUnavailable(
                f"the LLM endpoint {self.url} failed while {what}: {_describe(err)}; gave "
                f"up after {tries} (nothing was recorded for this round)") from err
        except oa.APIStatusError as err:  # 4xx: retrying will not help
            raise AgentUnavailable(
                f"the LLM endpoint {self.url} refused {what}: {_describe(err)}{_hint(err)} "
                "(not retried; nothing was recorded for this round)") from err


def reply_text(payload: Any, url: str) -> tuple[str, str | None]:
    """choices[0].message.content of a chat completion and the choice's finish_reason;
    NoAnswer naming what is missing."""
    choices = payload.get("choices") if isinstance(payload, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict):
        error = payload.get("error") if isinstance(payload, dict) else None
        if isinstance(error, dict):
            error = error.get("message", error)
        said = f": {_first_line(str(error))}" if error else ""
        raise NoAnswer(f"the LLM endpoint {url} answered HTTP 200 with JSON that holds no "
                       f"choices[0].message{said}")
    content = message.get("content")
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    finish = first.get("finish_reason") if isinstance(first, dict) else None
    return (content if isinstance(content, str) else "",
            finish if isinstance(finish, str) else None)


def _json_body(response: Any, what: str, url: str) -> Any:
    """The response's JSON; NoAnswer describing a body that is not (HTML, cut off, empty)."""
    text = response.text
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        problem = err
    kind = response.headers.get("content-type", "").lower()
    if not text.strip():
        body = "an empty body"
    elif "html" in kind or text.lstrip().startswith("<"):
        body = f"an HTML page{_page_title(text)}, not JSON: a proxy's or login page"
    elif problem.msg.startswith("Unterminated") or problem.pos >= len(text.rstrip()):
        body = f"JSON cut off after {len(text)} characters"
    else:
        body = f"invalid JSON ({problem.msg} at character {problem.pos} of {len(text)})"
    raise NoAnswer(f"the LLM endpoint {url} answered {what} with HTTP "
                   f"{response.status_code} and {body}")


def _page_title(text: str) -> str:
    found = _TITLE.search(text)
    if not found:
        return ""
    title = html.unescape(_TAGS.sub("", found.group(1) or found.group(2) or "")).strip()
    return f' ("{_first_line(title)[:80]}")' if title else ""


def _connect_failure(err: Exception) -> bool:
    return type(err.__cause__).__name__ in _CONNECT_FAILURES


def _cause(err: Exception) -> str:
    cause = err.__cause__ or err.__context__
    return _first_line(str(cause)) if cause else type(err).__name__


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0][:300] if lines else ""


def _describe(err: Exception) -> str:
    status = getattr(err, "status_code", None)
    text = _first_line(str(getattr(err, "message", "") or err)) or type(err).__name__
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
