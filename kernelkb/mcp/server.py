"""Build the MCP server over a store: the tools of tools.py, the task resources, and the
external runs that the evaluate tool writes back through."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.server.mcpserver.tools import Tool

from kernelkb.mcp.tasks import catalogue, task_entry
from kernelkb.mcp.tools import Tools

if TYPE_CHECKING:
    from kernelkb.retrieval.protocol import Knowledge

log = logging.getLogger(__name__)

INSTRUCTIONS = """KernelKB: memory and judge for Triton kernel optimization.
Read kernelkb://tasks for each task's run() signature, PyTorch reference and shapes.
Before an edit, ask retrieve_experiences (few-shot: what won and lost on this op and GPU),
insights (which edit categories win here) or bootstrap_plan (a card never measured).
Send each candidate to evaluate_kernel: it runs in a sandbox, returns layered feedback
and records the edit as an experience. record_experience stores one measured elsewhere."""


def strict(tool: Tool) -> Tool:
    """A tool that refuses arguments it does not take, as the HTTP API does (422): the
    SDK's argument model ignores them, so a misspelled ``top_k`` or an unsupported
    ``regime`` was dropped without a word. The schema the client sees says so too."""
    model = tool.fn_metadata.arg_model
    model.model_config["extra"] = "forbid"
    model.model_rebuild(force=True)
    tool.parameters = model.model_json_schema(by_alias=True)
    plain_argument_errors(tool)
    return tool


def plain_argument_errors(tool: Tool) -> None:
    """Arguments of the wrong type or out of bounds answered in sentences ("limit must be
    at most 50, not 500."), not pydantic's dump with its internal model name and a URL.
    The SDK raises ToolError from the ValidationError; that one is reworded."""
    from pydantic import ValidationError

    known = sorted(tool.fn_metadata.arg_model.model_fields)
    run = tool.run

    async def reworded(*args: Any, **kwargs: Any) -> Any:
        try:
            return await run(*args, **kwargs)
        except ToolError as err:
            if isinstance(err.__cause__, ValidationError):
                raise ToolError(f"Error executing tool {tool.name}: "
                                f"{argument_sentences(err.__cause__, known)}") from None
            raise

    object.__setattr__(tool, "run", reworded)  # a pydantic model: no plain setattr


def argument_sentences(err: Any, known: list[str]) -> str:
    out = []
    for e in err.errors(include_url=False):
        where = ".".join(str(p) for p in e["loc"]) or "arguments"
        kind, ctx = e["type"], e.get("ctx") or {}
        if kind == "missing":
            out.append(f"{where} is required")
        elif kind == "extra_forbidden":
            out.append(f"{where} is not an argument of this tool (its arguments: "
                       f"{', '.join(known)})")
        else:
            bound = {"less_than_equal": "at most {le}", "greater_than_equal": "at least {ge}",
                     "less_than": "below {lt}", "greater_than": "above {gt}",
                     "too_long": "at most {max_length} long",
                     "string_too_long": "at most {max_length} characters",
                     "string_too_short": "at least {min_length} characters",
                     "too_short": "at least {min_length} long"}.get(kind)
            got = repr(e.get("input"))
            got = got if len(got) <= 60 else got[:57] + "..."
            if bound:
                out.append(f"{where} must be {bound.format(**ctx)}, not {got}")
            else:
                message = str(e["msg"]).rstrip(".")
                out.append(f"{where}: {message[0].lower() + message[1:]}, not {got}")
    return "; ".join(out) + "."


def build_server(knowledge: Knowledge, *, write_back: bool | Callable[[], bool] = True,
                 journal_dir: Path, evaluator: Any = None,
                 timeout_s: float = 60.0) -> MCPServer:
    """An MCPServer whose tools read ``knowledge`` and write evaluations back to it (to a
    journal per run under ``journal_dir`` when ``write_back`` is off or it is down;
    a callable is asked on the first evaluation, once the store is open)."""
    def make_runs() -> Any:
        from kernelkb.optimizer.external import ExternalRuns  # torch, triton: on first evaluation

        writes = write_back() if callable(write_back) else write_back
        return ExternalRuns(knowledge if writes else None, journal_dir,
                            evaluator=evaluator, timeout_s=timeout_s)

    tools = [strict(Tool.from_function(fn)) for fn in Tools(knowledge, make_runs).all()]
    server: MCPServer = MCPServer("kernelkb", instructions=INSTRUCTIONS, version="0.1.0",
                                  tools=tools)

    @server.resource("kernelkb://tasks", name="tasks", mime_type="application/json",
                     description="every task: run() signature, reference source, shapes, "
                                 "dtypes, tolerances, knobs and variants")
    def tasks() -> str:
        return json.dumps(catalogue(), indent=1)

    @server.resource("kernelkb://tasks/{name}", name="task", mime_type="application/json",
                     description="one task, with its starting (naive) kernel's source")
    def task(name: str) -> str:
        from kernelkb.kernels.discovery import get_task

        try:
            return json.dumps(task_entry(get_task(name), with_kernel=True), indent=1)
        except KeyError as err:
            raise ResourceError(str(err.args[0])) from None

    return server
