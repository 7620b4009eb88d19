"""Build the MCP server over a store: the tools of tools.py, the task resources, and the
external runs that the evaluate tool writes back through."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from mcp.server.mcpserver.tools import Tool

from kernelkb.kb.entry.mcp.tasks import catalogue, task_entry
from kernelkb.kb.entry.mcp.tools import Tools

if TYPE_CHECKING:
    from kernelkb.kb.service import LocalKnowledge

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
    return tool


def build_server(knowledge: LocalKnowledge, *, write_back: bool | Callable[[], bool] = True,
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
        from kernelkb.kernels.base import get_task

        try:
            return json.dumps(task_entry(get_task(name), with_kernel=True), indent=1)
        except KeyError as err:
            raise ResourceError(str(err.args[0])) from None

    return server
