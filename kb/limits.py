"""Bounds on what the store accepts: one set of limits for the API, `ingest` and `import`.

Why: a value the store cannot read back (NaN, an integer past 64 bits, a lone surrogate)
or one that costs seconds of CPU (a 10 MB op type) must be refused at the edge, with the
field named, rather than stored and failing every later read.

Limits (characters): names and identifiers ``SHORT`` (256); free text such as
a hint or a command ``TEXT`` (4,000); a summary ``SUMMARY`` (2,000); an error message or
the feedback text ``LONG_TEXT`` (20,000); a diff ``DIFF`` (100,000); a kernel source
``SOURCE`` (200,000). Integers fit in 64 bits and counters have their own bounds; floats
are finite. A config holds at most ``CONFIG_KEYS`` keys; lists at most ``LIST_ITEMS``.
Physical quantities stay in ranges a real device or measurement can have (bandwidth,
peak throughput, times, ratios), a record's date in ``YEARS``; true/false is not a number.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

SHORT = 256
TEXT = 4_000
SUMMARY = 2_000  # an edit's summary (it is embedded and shown in every prompt)
LONG_TEXT = 20_000  # an error message or feedback text (may hold a traceback)
DIFF = 100_000
SOURCE = 200_000
CONFIG_KEYS = 256
LIST_ITEMS = 1_000
INT64_MAX = 2**63 - 1
ITERATION_MAX = 10_000_000
COUNT_MAX = 2**31 - 1  # registers, spills, bytes, SM counts
OFFSET_MAX = 10**9  # paging offset
BATCH_ITEMS = 1_000  # records in one POST /experiences/batch (the client sends chunks)
IMPORT_FILE_BYTES = 256 * 2**20  # one imported file, once gunzipped (the largest known: 16 MB)
# physical quantities, in ranges any real device or measurement falls in: a value past
# them (5e-324 GB/s, 1e300 TFLOPS) is a typo or an attack, and its ratios overflow
BANDWIDTH_GBPS = (0.01, 1e6)
PEAK_TFLOPS = (1e-4, 1e6)
TIME_MS = (1e-9, 1e9)  # a femtosecond to eleven days
RATIO_MAX = 1e9  # speedups, throughput shares
# when a record was made (UTC): a date outside these years cannot be one
YEARS = (1970, 2200)
# a shape regime (kernels/regimes.py Regimes): a name, or several joined by "+" for a record
# whose shapes span regimes
REGIME = re.compile(r"^[a-z][a-z0-9_]{0,31}(\+[a-z][a-z0-9_]{0,31}){0,15}$")


def check_regime(value: str | None) -> str | None:
    """A regime name as records, queries and dispatch tables carry it; ValueError else."""
    if value is not None and not REGIME.match(value):
        raise ValueError(f"regime {value[:80]!r}: lower-case names (letters, digits, _; "
                         "<= 32 characters) joined by '+'")
    return value


def check_name(value: str) -> str:
    """A name that filters and groups records (op, task, dtype, GPU, arch, versions), as
    written: names are matched in any case and spacing, so one padded with spaces, spelled
    with look-alike (NFKC-unstable) characters or with no letter or digit at all would
    stand beside the real name or capture a lookup of it; ValueError for those."""
    if value != value.strip() or "  " in value:
        raise ValueError(f"name {value[:80]!r}: spaces at either end or doubled")
    if not (value.isascii() and value.isprintable()):  # printable ASCII is NFKC-stable
        if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in value):
            raise ValueError(f"name {value[:80]!r}: control or invisible characters")
        if unicodedata.normalize("NFKC", value) != value:
            raise ValueError(f"name {value[:80]!r}: not in NFKC form (look-alike "
                             f"characters); write {unicodedata.normalize('NFKC', value)[:80]!r}")
    if not any(c.isascii() and c.isalnum() for c in value):
        raise ValueError(f"name {value[:80]!r}: no letter or digit a-z, 0-9")
    markup = sorted(set(value) & MARKUP)
    if markup:
        raise ValueError(f"name {value[:80]!r}: {''.join(markup)!r} belong to markup, "
                         "templates or chat-control tokens, never to a name")
    return value


MARKUP = frozenset("<>`|{}")  # tags, fences, chat tokens (<|im_start|>), template fields


def text_problem(value: str) -> str | None:
    """Why a string cannot be stored (NUL, invalid Unicode), or None when it is fine."""
    if "\x00" in value:
        return "contains a NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode (lone surrogate)"
    return None


def check_strings(value: Any) -> Any:
    """Walk a value (str, list, dict) and raise ValueError on the first bad string."""
    if isinstance(value, str):
        problem = text_problem(value)
        if problem:
            raise ValueError(f"text {problem}")
    elif isinstance(value, list | tuple):
        for item in value:
            check_strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            check_strings(key)
            check_strings(item)
    return value


def printable(value: str, limit: int = TEXT) -> str:
    """A string safe to put in a JSON response: invalid Unicode escaped, length capped."""
    text = value.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= limit else text[:limit] + "..."
