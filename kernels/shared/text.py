"""Text a candidate controls (its exception messages, its prints), made inert.

Why: a candidate's error message is shown on a terminal, in a page and in the next
prompt. Control characters in it (an escape sequence that retitles the terminal, clears
the screen or paints a fake "ok" line) act wherever it is printed, so every character
that is not printable text, a newline or a tab is shown as its escape instead.
"""

from __future__ import annotations

import unicodedata

KEPT = frozenset("\n\t")


def inert(text: str | None) -> str | None:
    """``text`` with each control, format or separator character written as ``\\xNN``
    / ``\\uNNNN`` (None stays None)."""
    if text is None:
        return None
    return "".join(c if c in KEPT or unicodedata.category(c) not in
                   ("Cc", "Cf", "Zl", "Zp", "Cs") else c.encode("unicode_escape").decode()
                   for c in text)
