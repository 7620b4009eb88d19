"""The MCP tools: thin wrappers over the same functions the HTTP API and the loop use.

Every argument has a JSON schema with bounds (the SDK builds it from these annotations and
refuses a call outside it); an anticipated failure (unknown task or GPU, a source that is
no Python module, a record that does not validate: any error ``kernelkb.errors`` renders)
raises ``ToolError``, which the client
receives as an ``isError`` result with the reason, never as a dropped connection.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field, ValidationError

from kernelkb import operations
from kernelkb.errors import user_message
from kernelkb.kb import limits
from kernelkb.kb.record import ExperienceRecord
from kernelkb.kernels.shared.vocabulary import EDIT_CATEGORIES, Dtype
from kernelkb.retrieval.query import RetrievalQuery

if TYPE_CHECKING:
    from kernelkb.retrieval.protocol import Knowledge

Name = Annotated[str, Field(min_length=1, max_length=limits.SHORT)]
OptName = Annotated[str | None, Field(max_length=limits.SHORT)]
Source = Annotated[str, Field(min_length=1, max_length=limits.SOURCE,
                              description="the whole candidate module: header constants, "
                              "@triton.jit kernels and run(...) with the task's signature")]
Category = Literal[EDIT_CATEGORIES]  # type: ignore[valid-type]
ShapeSet = Literal["auto", "cpu", "edge", "sweep", "all", "representative", "tune"]
Shape = Annotated[list[Annotated[int, Field(ge=1, le=2**31 - 1)]],
                  Field(min_length=1, max_length=8)]


def _brief(hit: Any) -> dict[str, Any]:
    """One retrieved experience, without its full diff and source."""
    r = hit.record
    return {"id": r.id, "score": round(hit.score, 4), "rung": hit.rung,
            "evidence": hit.evidence, "related": hit.related,
            "version_note": hit.version_note, "op_type": r.task.op_type,
            "task_id": r.task.task_id, "gpu_name": r.env.gpu_name,
            "triton_version": r.env.triton_version, "verdict": r.verdict.value,
            "summary": r.edit.summary, "categories": r.edit.categories,
            "config": r.edit.config, "speedup_vs_parent": r.feedback.speedup_vs_parent}


class Tools:
    """The tool functions, bound to one store and the external runs of this process
    (made on the first evaluation: the sandbox brings torch and triton)."""

    def __init__(self, knowledge: Knowledge, make_runs: Callable[[], Any]) -> None:
        self.knowledge, self._make_runs = knowledge, make_runs
        self._runs: Any = None
        self._lock = threading.Lock()

    @property
    def runs(self) -> Any:
        with self._lock:
            if self._runs is None:
                self._runs = self._make_runs()
            return self._runs

    def retrieve_experiences(
        self,
        op: Annotated[OptName, Field(description="the op, e.g. softmax, attention")] = None,
        kernel_source: Annotated[str | None, Field(max_length=limits.SOURCE)] = None,
        feedback_text: Annotated[str | None, Field(max_length=limits.LONG_TEXT,
                                                   description="the latest feedback")] = None,
        gpu_name: OptName = None, arch: OptName = None, triton_version: OptName = None,
        task: Annotated[OptName, Field(description="the task the kernel is for, e.g. softmax "
                                       "(kernelkb://tasks): its own experiences rank first")
                        ] = None,
        dtype: OptName = None,
        limit: Annotated[int | None, Field(ge=1, le=50, description="experiences returned "
                                           "at most (default 5)")] = None,
        max_chars: Annotated[int, Field(ge=200, le=100_000)] = 4000,
        include_related: bool = True,
        regime: Annotated[OptName, Field(description="the task's shape regime, e.g. "
                                         "long_rows (kernelkb dispatch regimes)")] = None,
        op_type: Annotated[OptName, Field(description="deprecated: the older name of op")
                           ] = None,
        k: Annotated[int | None, Field(ge=1, le=50, description="deprecated: the older name "
                                       "of limit")] = None,
        task_id: Annotated[OptName, Field(description="deprecated: the older name of task")
                           ] = None,
    ) -> dict[str, Any]:
        """Few-shot experiences for a kernel and its feedback: what was tried on this op (and
        related ops) on this GPU, what won and what lost, as a prompt block plus the hits.
        An unknown op, task or GPU is an error naming the closest known one."""
        name = one_of("op", op, "op_type", op_type)
        if name is None:
            raise ToolError("op is required: the op to retrieve for, e.g. softmax")
        count = one_of("limit", limit, "k", k)
        try:
            query = RetrievalQuery(op_type=name, kernel_source=kernel_source,
                                   feedback_text=feedback_text, gpu_name=gpu_name, arch=arch,
                                   triton_version=triton_version,
                                   task_id=one_of("task", task, "task_id", task_id),
                                   dtype=dtype, k=5 if count is None else count,
                                   max_chars=max_chars, include_related=include_related,
                                   regime=regime)
        except ValidationError as err:
            raise ToolError(f"bad query: {_reasons(err)}") from None
        result = operations.retrieve(self.knowledge, query)
        return {"prompt_block": result.prompt_block,
                "hits": [_brief(h) for h in result.hits],
                "warnings": [_brief(h) for h in result.warnings],
                "rungs_used": result.rungs_used, "candidates": result.candidates}

    def insights(
        self,
        op: Annotated[OptName, Field(description="the op, e.g. softmax")] = None,
        gpu_name: OptName = None, arch: OptName = None,
        triton_version: Annotated[OptName, Field(description="filter to this version")] = None,
        current_triton: Annotated[OptName, Field(
            description="label and rank lower what another Triton version measured")] = None,
        regime: Annotated[OptName, Field(description="keep experiences measured on shapes "
                                         "of this regime")] = None,
        op_type: Annotated[OptName, Field(description="deprecated: the older name of op")
                           ] = None,
    ) -> dict[str, Any]:
        """What worked for an op on a GPU: per edit category, how often it won, by how much
        (median and best speedup), with example experience ids. Names match in any case and
        by short forms ('h200'); an unknown one is an error naming the closest."""
        names = operations.resolve(self.knowledge, op_type=one_of("op", op, "op_type", op_type),
                                   gpu_name=gpu_name, arch=arch)
        report = self.knowledge.insights(op_type=names["op_type"], gpu_name=names["gpu_name"],
                                         arch=names["arch"], triton_version=triton_version,
                                         current_triton=current_triton, regime=regime)
        return report.model_dump(mode="json")

    def bootstrap_plan(
        self,
        gpu_name: Annotated[OptName, Field(description="a part kernels.shared.gpus knows, e.g. "
                                           "'NVIDIA H100 SXM'; or give the facts below")] = None,
        op: Annotated[OptName, Field(description="the op, e.g. softmax: then the learned "
                                     "ranker's order of its configurations too")] = None,
        arch: OptName = None,
        sm_count: Annotated[int | None, Field(ge=1, le=limits.COUNT_MAX)] = None,
        mem_bandwidth_gbps: Annotated[float | None, Field(gt=0, le=1e6)] = None,
        smem_per_sm_kib: Annotated[int | None, Field(ge=1, le=limits.COUNT_MAX)] = None,
        triton_version: OptName = None,
        dtype: Dtype = "float16",
        include_own: bool = False,
        limit: Annotated[int, Field(ge=1, le=500)] = 10,
        shapes: Annotated[list[Name] | None, Field(
            max_length=limits.LIST_ITEMS, description="shape labels such as "
            "'rows=1024,cols=128256': each task's best configuration is then the one measured "
            "fastest on them")] = None,
        op_type: Annotated[OptName, Field(description="deprecated: the older name of op")
                           ] = None,
    ) -> dict[str, Any]:
        """What to try first on a card: the edits and configurations that won on the most
        similar hardware and, with an op, the learned ranker's order of its configurations."""
        env = {k: v for k, v in (("gpu_name", gpu_name), ("arch", arch), ("sm_count", sm_count),
                                 ("mem_bandwidth_gbps", mem_bandwidth_gbps),
                                 ("smem_per_sm_kib", smem_per_sm_kib),
                                 ("triton_version", triton_version)) if v is not None}
        if not env:
            raise ToolError("name the GPU (gpu_name) or give its facts (arch, sm_count, "
                            "mem_bandwidth_gbps, smem_per_sm_kib)")
        plan = operations.bootstrap(self.knowledge, env,
                                    op_type=one_of("op", op, "op_type", op_type),
                                    include_own=include_own, dtype=dtype, limit=limit,
                                    shapes=shapes)
        return plan.model_dump(mode="json")

    def evaluate_kernel(
        self,
        task: Annotated[Name, Field(description="a task name from kernelkb://tasks")],
        source: Source,
        summary: Annotated[str, Field(min_length=1, max_length=1000,
                                      description="what the edit does, in your words")],
        categories: Annotated[list[Category], Field(min_length=1, max_length=8)] = ["other"],  # noqa: B006
        rationale: Annotated[str, Field(max_length=1000)] = "",
        parent_source: Annotated[str | None, Field(
            max_length=limits.SOURCE, description="the kernel you edited; default: the "
            "run's best so far (at first the task's starting kernel)")] = None,
        claimed_gain: Annotated[bool, Field(description="you expect it to be faster: a gain "
                                            "within noise then makes the round invalid")] = False,
        dtype: Dtype = "float16",
        shapes: Annotated[ShapeSet | list[Shape], Field(
            description="a shape set name, or explicit shapes", max_length=64)] = "auto",
        run_id: OptName = None,
        agent: Annotated[str, Field(min_length=1, max_length=limits.SHORT)] = "mcp",
        model: OptName = None,
    ) -> dict[str, Any]:
        """Evaluate a candidate kernel in the sandbox and return the layered feedback
        (compile, correctness statistics, timing against baseline and parent, roofline,
        hint), judged against its parent and written back as an experience the way the
        built-in loop writes its rounds (a run's first call also evaluates and writes its
        starting kernel). Without a GPU only correctness is checked."""
        from kernelkb.optimizer.external import Candidate

        shape_arg: str | list[tuple[int, ...]] = shapes if isinstance(shapes, str) else \
            [tuple(s) for s in shapes]
        run = self.runs.run_for(task, dtype, shape_arg, run_id, agent, model)
        outcome = self.runs.evaluate(run, Candidate(
            source=source, summary=summary, categories=tuple(categories),
            rationale=rationale, claimed_gain=claimed_gain, parent_source=parent_source))
        return outcome.as_dict()

    def record_experience(self, record: ExperienceRecord) -> dict[str, Any]:
        """Store one edit + feedback measured elsewhere, validated as `kernelkb ingest`
        validates (kb/limits.py bounds); its id is a content hash, so recording it twice
        stores it once ('duplicate')."""
        report = self.knowledge.ingest([record])
        if report.rejected:
            raise ToolError("rejected: " + "; ".join(f"{r.field}: {r.reason}"
                                                      for r in report.rejected))
        status = "stored" if report.accepted else "duplicate"
        return {"id": record.id, "status": status}

    def all(self) -> list[Callable[..., dict[str, Any]]]:
        return [user_errors(tool) for tool in (
            self.retrieve_experiences, self.insights, self.bootstrap_plan,
            self.evaluate_kernel, self.record_experience)]


def user_errors(tool: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """The tool with every error a user can fix (kernelkb.errors) turned into a
    ``ToolError``: the client gets the same sentence the CLI prints and the API answers."""
    @functools.wraps(tool)
    def call(*args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return tool(*args, **kwargs)
        except ToolError:
            raise
        except Exception as err:
            message = user_message(err)
            if message is None:
                raise
            raise ToolError(message) from None

    return call


def one_of(name: str, value: Any, old: str, old_value: Any) -> Any:
    """An argument given by its name or its older (deprecated) one; both, differing: an
    error in words."""
    if value is not None and old_value is not None and value != old_value:
        raise ToolError(f"{name} {value!r} and {old} {old_value!r}: give one ({old} is the "
                        f"older name of {name})")
    return value if value is not None else old_value


def _reasons(err: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '<query>'}: "
                     f"{limits.printable(str(e['msg']), 300)}" for e in err.errors())
