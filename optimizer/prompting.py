"""Prompt templates live in optimizer/prompts/*.txt, in one place; this only loads them.

``string.Template`` ($name) rather than str.format, because kernel code is full of braces.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from string import Template

PROMPT_DIR = Path(__file__).resolve().parent / "prompts"


@cache
def template(name: str) -> Template:
    path = PROMPT_DIR / f"{name}.txt"
    if not path.is_file():
        raise FileNotFoundError(f"no prompt template {path}")
    return Template(path.read_text())


def render(name: str, **values: object) -> str:
    """Fill a template; a missing placeholder is an error, not a silent '$name'."""
    return template(name).substitute({k: str(v) for k, v in values.items()})
