"""Templates and the filters that turn stored text into HTML.

Everything a record holds is untrusted (an LLM wrote the summaries and kernels, anyone
with the token can ingest): Jinja2 autoescapes every value; the diff goes through
Pygments, which escapes what it highlights; report sections through markdown-it with
raw HTML off, which escapes it and refuses javascript: links.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from jinja2 import pass_context
from markdown_it import MarkdownIt
from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import DiffLexer, PythonLexer
from starlette.templating import Jinja2Templates

HERE = Path(__file__).parent
_FORMATTER = HtmlFormatter(cssclass="hl")
PYGMENTS_CSS = _FORMATTER.get_style_defs(".hl")
_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable("table")


def diff_html(diff: str) -> Markup:
    return Markup(highlight(diff, DiffLexer(), _FORMATTER))  # pygments escapes the text


def python_html(source: str) -> Markup:
    return Markup(highlight(source, PythonLexer(), _FORMATTER))


def markdown_html(text: str) -> Markup:
    return Markup(_MARKDOWN.render(text))  # html off: raw HTML is escaped


def ms(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.4f}"


def times(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.2f}x"


def percent(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{100 * value:.0f}%"


@pass_context
def path_for(context: dict[str, Any], name: str, /, **params: Any) -> str:
    """The route's path, without scheme and host: Starlette's url_for builds absolute links
    from the request's Host header, which a client chooses."""
    scope = context["request"].scope
    prefix = scope.get("app_root_path", scope.get("root_path", "")).rstrip("/")
    return prefix + str(scope["router"].url_path_for(name, **params))


def templates() -> Jinja2Templates:
    t = Jinja2Templates(directory=str(HERE / "templates"))  # autoescape on for .html
    t.env.globals["url_for"] = path_for
    t.env.filters.update(diff_html=diff_html, python_html=python_html,
                         markdown_html=markdown_html, ms=ms, times=times, percent=percent)
    t.env.globals["pygments_css"] = Markup(PYGMENTS_CSS)  # our own CSS
    return t


def query_string(**params: Any) -> str:
    """URL query of the non-empty params (links that keep the page's filters)."""
    from urllib.parse import urlencode

    return urlencode({k: v for k, v in params.items() if v not in (None, "")})
