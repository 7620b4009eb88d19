"""Retrieved text is data, not instructions: quote it before it goes into a prompt.

Why: any client that can write to the store (or a poisoned import) controls the text of
a record, and the few-shot block pastes that text into the LLM agent's prompt. A record
whose summary opens a fake "## Reminders" section, a fake system turn or a code block
must reach the model as inert, clearly delimited quotation. So each field is flattened to
one line (no new headings or turns can start), code fences, chat-template tokens and tags
that could close the block are escaped, and each field is capped. Look-alikes are undone
first: invisible format characters (zero-width spaces, direction overrides) go, and
compatibility forms (fullwidth "＜") become the plain ones, so "<\u200b/tag>" or "＜/tag＞"
cannot pass for a tag the escaping missed. The agent's system
prompt says the block is untrusted (optimizer/prompts/system.txt).
"""

from __future__ import annotations

import re
import unicodedata

OPEN = "<retrieved-experiences>"  # the system prompt says what is inside is data
CLOSE = "</retrieved-experiences>"
FIELD_CHARS = 300  # a summary, hint or error message
NAME_CHARS = 60  # op, task, GPU, versions, config keys and values
LINE_CHARS = 160  # one diff line

_LINE_BREAKS = re.compile(r"[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]+")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
# "<" before anything but a space, digit, "=" or "<" (code's comparisons and shifts stay):
# </retrieved-experiences>, <|im_start|>, <system>, and a tag in any script
_TAG = re.compile(r"<(?![\s\d=<])")
# invisible format characters: soft hyphen, zero-width and joiner characters, direction
# marks and overrides, word joiners, variation selectors, the BOM, tag characters
_INVISIBLE = re.compile("[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f"
                        "\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f"
                        "\ufeff\uffa0\ufff0-\ufffb\U000e0000-\U000e0fff]")
_CHAT_TOKEN = re.compile(r"\|>")


def inline(text: object, limit: int = FIELD_CHARS) -> str:
    """One line of quoted text: line breaks become ' / ', fences and tags are escaped."""
    flat = _LINE_BREAKS.sub(" / ", str(text))
    return _cap(_escape(flat), limit)


def code_line(text: str, limit: int = LINE_CHARS) -> str:
    """One line of a quoted diff: kept as code, but fences and tags escaped."""
    return _cap(_escape(_LINE_BREAKS.sub(" ", text)), limit)


def wrap(block: str) -> str:
    """The delimited block; whatever is inside was escaped and cannot close it."""
    return f"{OPEN}\n{block}\n{CLOSE}"


WRAP_CHARS = len(OPEN) + len(CLOSE) + 2


def _escape(text: str) -> str:
    text = unicodedata.normalize("NFKC", _INVISIBLE.sub("", text))
    text = _CONTROL.sub("", _LINE_BREAKS.sub(" ", text))  # NFKC may make new breaks
    text = text.replace("```", "'''").replace("~~~", "'''")
    text = _TAG.sub("&lt;", text)
    return _CHAT_TOKEN.sub("|&gt;", text)


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
