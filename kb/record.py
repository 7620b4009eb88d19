"""The experience record: the one wire format every part of KernelKB shares.

An experience is one edit of a kernel plus the measured feedback on it. The optimizer
writes these, the store keeps them (SQL is the truth), the index embeds them, retrieval
serves them back. JSONL files in seeds/ and optimizer journals hold one record per line.

Validation is strict on purpose: a malformed record gets an error that names the field
and the reason (pydantic's ``loc`` and ``msg``), never a silent default.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from functools import cache
from typing import Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from kernelkb.kb import limits
from kernelkb.kb.limits import (
    BANDWIDTH_GBPS,
    COUNT_MAX,
    PEAK_TFLOPS,
    RATIO_MAX,
    SHORT,
    TEXT,
    TIME_MS,
    check_strings,
)
from kernelkb.kernels.shared.vocabulary import EDIT_CATEGORIES, RoundKind, Verdict

Stage = Literal["syntax", "compile", "run", "correctness", "performance"]
ConfigValue = int | float | str | bool


class _Strict(BaseModel):
    """Unknown keys, non-finite floats, NUL and invalid Unicode are errors; a string is at
    most ``limits.SHORT`` characters unless its field says more (kb/limits.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False,
                              str_max_length=SHORT)

    @field_validator("*")
    @classmethod
    def _storable_text(cls, value: Any) -> Any:
        return check_strings(value)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        """pydantic takes true as 1 and "1_000" as 1000 in a number field; a record that
        says ``iteration: true`` or ``"0.5"`` is malformed, not a number."""
        if isinstance(value, (bool, str)) and info.field_name in _number_fields(cls):
            raise ValueError("expected a number, got "
                             + ("true/false" if isinstance(value, bool) else "a string"))
        return value


@cache
def _number_fields(model: type[BaseModel]) -> frozenset[str]:
    """Fields of ``model`` that hold an int or a float (or None) and nothing else."""
    def numeric(annotation: Any) -> bool:
        kinds = {a for a in (get_args(annotation) or (annotation,)) if a is not type(None)}
        return bool(kinds) and kinds <= {int, float}

    return frozenset(name for name, field in model.model_fields.items()
                     if numeric(field.annotation))


def _time_ms(description: str | None = None) -> Any:
    return Field(default=None, ge=TIME_MS[0], le=TIME_MS[1], description=description)


class TaskInfo(_Strict):
    op_type: str = Field(min_length=1, description="op family, e.g. softmax, attention")
    task_id: str = Field(min_length=1, description="task name in kernels/, e.g. softmax")
    dtype: str = Field(min_length=1, description="torch dtype name, e.g. float16")
    shape_set: str = Field(default="sweep", max_length=TEXT,
                           description="which shapes were evaluated")
    regime: str | None = Field(
        default=None, max_length=SHORT,
        description="the task's shape regime these shapes fall in (row-length class, M "
                    "bucket, prefill/decode), several joined by '+'; None: not recorded "
                    "(readers derive it from the shapes)")

    _names = field_validator("op_type", "task_id", "dtype")(limits.check_name)

    @field_validator("regime")
    @classmethod
    def _regime_name(cls, value: str | None) -> str | None:
        return limits.check_regime(value)


class Environment(_Strict):
    """Hardware fingerprint plus software versions. ``arch`` is e.g. sm_90 or cpu."""

    gpu_name: str = Field(min_length=1)
    arch: str = Field(min_length=1)
    sm_count: int | None = Field(default=None, ge=1, le=COUNT_MAX)
    mem_bandwidth_gbps: float | None = Field(default=None, ge=BANDWIDTH_GBPS[0],
                                             le=BANDWIDTH_GBPS[1])
    smem_per_sm_kib: int | None = Field(default=None, ge=1, le=COUNT_MAX)
    peak_tflops: float | None = Field(default=None, ge=PEAK_TFLOPS[0], le=PEAK_TFLOPS[1])
    triton_version: str = Field(min_length=1)
    torch_version: str = Field(min_length=1)
    cuda_version: str | None = None
    vendor: str | None = Field(default=None, description="nvidia, amd, ...; None = not recorded")

    _names = field_validator("gpu_name", "arch", "triton_version", "torch_version")(
        limits.check_name)


class Edit(_Strict):
    summary: str = Field(min_length=1, max_length=limits.SUMMARY,
                         description="the agent's own words: what the edit does")
    rationale: str | None = Field(
        default=None, max_length=1000,
        description="why the agent tried it then (its evidence, search state); kept with "
                    "the record, left out of the embedded text")
    categories: list[str] = Field(min_length=1, max_length=len(EDIT_CATEGORIES))
    diff: str = Field(default="", max_length=limits.DIFF,
                      description="unified diff against the parent kernel")
    config: dict[str, ConfigValue] = Field(default_factory=dict, max_length=limits.CONFIG_KEYS)
    parent_hash: str | None = None
    child_hash: str = Field(min_length=8)
    child_source: str | None = Field(default=None, max_length=limits.SOURCE,
                                      description="kernel source, optional")

    @field_validator("config", mode="before")
    @classmethod
    def _int64_values(cls, value: Any) -> Any:
        if isinstance(value, dict):
            for key, item in value.items():
                if isinstance(item, int) and not isinstance(item, bool) and \
                        not -limits.INT64_MAX - 1 <= item <= limits.INT64_MAX:
                    raise ValueError(f"config[{key!r}] does not fit in 64 bits")
        return value

    @field_validator("categories")
    @classmethod
    def _known_categories(cls, value: list[str]) -> list[str]:
        unknown = sorted(set(value) - set(EDIT_CATEGORIES))
        if unknown:
            raise ValueError(f"unknown categories {unknown}; known: {list(EDIT_CATEGORIES)}")
        return sorted(set(value))


class ShapeTiming(_Strict):
    shape: str
    median_ms: float = Field(ge=TIME_MS[0], le=TIME_MS[1],
                             description="call time: the eager call, host side included")
    iqr_ms: float | None = Field(default=None, ge=0, le=TIME_MS[1])
    graph_ms: float | None = _time_ms("CUDA-graph replay: GPU time alone")
    baseline_ms: float | None = _time_ms()
    gpu_ms: float | None = _time_ms("GPU time per call (events behind a sleep, L2 flushed)")
    gpu_iqr_ms: float | None = Field(default=None, ge=0, le=TIME_MS[1])
    host_ms: float | None = Field(default=None, ge=0, le=TIME_MS[1],
                                  description="host cost of one call (wrapper, launches)")
    ratio: float | None = Field(default=None, gt=0, le=RATIO_MAX,
                                description="incumbent / candidate GPU time on this shape")
    ratio_low: float | None = Field(default=None, gt=0, le=RATIO_MAX)
    ratio_high: float | None = Field(default=None, gt=0, le=RATIO_MAX)


class Comparison(_Strict):
    """The verdict's evidence: the candidate timed against its incumbent, interleaved in
    one worker (optimizer/sandbox/compare.py). ``ratio`` > 1: the candidate is faster."""

    ratio: float = Field(gt=0, le=RATIO_MAX)
    low: float = Field(gt=0, le=RATIO_MAX, description="95% interval, lower end")
    high: float = Field(gt=0, le=RATIO_MAX, description="95% interval, upper end")
    rounds: int = Field(ge=1, le=COUNT_MAX)
    calls_per_round: int = Field(ge=1, le=COUNT_MAX)
    noise_floor: float = Field(ge=0, le=1)
    outcome: Literal["improved", "neutral", "regressed"]
    incumbent_hash: str | None = Field(default=None, max_length=64)
    drift: float | None = Field(default=None, gt=0, le=RATIO_MAX,
                                description="incumbent's GPU time now / when it was measured")


class Feedback(_Strict):
    """Layered feedback: the stage reached, then error statistics, then timing."""

    stage: Stage
    error_kind: str | None = None  # syntax_error, compile_error, timeout, wrong_result, ...
    error_message: str | None = Field(default=None, max_length=limits.LONG_TEXT)
    failing_shapes: list[str] = Field(default_factory=list, max_length=limits.LIST_ITEMS)
    max_abs_err: float | None = Field(default=None, ge=0)
    max_rel_err: float | None = Field(default=None, ge=0)
    mean_abs_err: float | None = Field(default=None, ge=0)
    bias: float | None = None
    mismatch_share: float | None = Field(default=None, ge=0, le=1)
    timing_available: bool = False
    timings: list[ShapeTiming] = Field(default_factory=list, max_length=limits.LIST_ITEMS)
    time_ms: float | None = _time_ms("geomean of shape medians")
    baseline_ms: float | None = _time_ms()
    parent_ms: float | None = _time_ms()
    speedup_vs_baseline: float | None = Field(default=None, ge=1 / RATIO_MAX, le=RATIO_MAX)
    speedup_vs_parent: float | None = Field(default=None, ge=1 / RATIO_MAX, le=RATIO_MAX)
    achieved_gbps: float | None = Field(default=None, ge=0, le=BANDWIDTH_GBPS[1])
    achieved_tflops: float | None = Field(default=None, ge=0, le=PEAK_TFLOPS[1])
    peak_share: float | None = Field(default=None, ge=0, le=RATIO_MAX)
    registers: int | None = Field(default=None, ge=0, le=COUNT_MAX)
    spills: int | None = Field(default=None, ge=0, le=COUNT_MAX)
    smem_bytes: int | None = Field(default=None, ge=0, le=COUNT_MAX)
    bottleneck_hint: str | None = Field(default=None, max_length=TEXT)
    suspect: bool = False
    comparison: Comparison | None = None
    time_basis: Literal["gpu", "call"] | None = Field(
        default=None, description="what time_ms is: GPU time, or call time (older records)")
    text: str = Field(default="", max_length=limits.LONG_TEXT,
                      description="the feedback text the agent was shown")

    @model_validator(mode="after")
    def _timing_needs_times(self) -> Feedback:
        if self.stage == "performance" and self.timing_available and self.time_ms is None:
            raise ValueError("stage 'performance' with timing_available needs time_ms")
        return self


class Provenance(_Strict):
    agent: str = Field(min_length=1, description="offline, llm, sweep, human, ...")
    model: str | None = None
    round_kind: RoundKind = "exploit"
    command: str | None = Field(default=None, max_length=TEXT,
                                 description="command that produced it")
    source: str | None = Field(default=None, max_length=TEXT,
                                description="seed set or host it came from")
    license: str | None = Field(default=None, description="licence of imported data, e.g. MIT")
    device: str | None = Field(default=None,
                               description="the device name as the source data wrote it")
    date: datetime | None = Field(default=None, description="when it was measured, if known")

    @field_validator("date")
    @classmethod
    def _a_real_date(cls, value: datetime | None) -> datetime | None:
        return None if value is None else _in_years(value)


def _in_years(value: datetime) -> datetime:
    """``value`` when its year, in UTC (a zoneless time as written), lies in limits.YEARS:
    a time near year 1 or 9999 overflows once converted, and no measurement was made then."""
    try:
        year = value.astimezone(timezone.utc).year if value.tzinfo else value.year
    except OverflowError:
        year = value.year
    if not limits.YEARS[0] <= year < limits.YEARS[1]:
        raise ValueError(f"year {year} (UTC) is outside {limits.YEARS[0]}-"
                         f"{limits.YEARS[1] - 1}")
    return value


# Fields added after records were stored: left out of the content hash while None, so old
# records keep their ids. A path names a field; "[]" steps into every item of a list.
_OPTIONAL_LATER: tuple[tuple[str, ...], ...] = (
    ("task", "regime"),
    ("edit", "rationale"),
    ("env", "vendor"),
    ("provenance", "license"),
    ("provenance", "device"),
    ("provenance", "date"),
    ("feedback", "timings", "[]", "graph_ms"),
    ("feedback", "timings", "[]", "gpu_ms"),
    ("feedback", "timings", "[]", "gpu_iqr_ms"),
    ("feedback", "timings", "[]", "host_ms"),
    ("feedback", "timings", "[]", "ratio"),
    ("feedback", "timings", "[]", "ratio_low"),
    ("feedback", "timings", "[]", "ratio_high"),
    ("feedback", "comparison"),
    ("feedback", "time_basis"),
)


def _drop_if_none(node: Any, path: tuple[str, ...]) -> None:
    """Delete the field at ``path`` under ``node`` wherever it is None."""
    head, rest = path[0], path[1:]
    if head == "[]":
        for item in node:
            _drop_if_none(item, rest)
    elif not rest:
        if node.get(head, 0) is None:
            del node[head]
    elif isinstance(node.get(head), (dict, list)):
        _drop_if_none(node[head], rest)


class ExperienceRecord(_Strict):
    """One edit + feedback pair. ``id`` is a content hash, so re-ingesting is a no-op."""

    id: str | None = Field(default=None, max_length=64)
    run_id: str = Field(min_length=1)
    iteration: int = Field(ge=0, le=limits.ITERATION_MAX)
    created_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    task: TaskInfo
    env: Environment
    edit: Edit
    feedback: Feedback
    verdict: Verdict
    provenance: Provenance

    # pydantic runs an "after" validator again whenever a checked record is placed in
    # another model (a Hit, a Page): the hash cost ~0.3 ms each time, a third of a
    # retrieve's CPU. A frozen record checked once stays checked.
    _id_checked: bool = PrivateAttr(default=False)

    @field_validator("created_at")
    @classmethod
    def _a_real_moment(cls, value: datetime) -> datetime:
        """A time without a zone is taken as UTC (the store keeps zoned times); its year,
        in UTC, must lie in ``limits.YEARS``."""
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return _in_years(value)

    @model_validator(mode="after")
    def _fill_and_check_id(self) -> ExperienceRecord:
        if self._id_checked:
            return self
        expected = self.content_hash()
        if self.id is None:
            object.__setattr__(self, "id", expected)
        elif self.id != expected:
            raise ValueError(f"id {self.id!r} does not match the content hash {expected!r}")
        self._id_checked = True
        return self

    def content_hash(self) -> str:
        """sha256 over everything but ``id`` and ``created_at``: same content, same id."""
        payload = self.model_dump(mode="json", exclude={"id", "created_at"})
        for path in _OPTIONAL_LATER:  # added later: old records keep their ids
            _drop_if_none(payload, path)
        canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:32]

    @property
    def confidence(self) -> Literal["significant", "within_noise", "unknown_spread"]:
        """How sure the verdict is: significant when an interleaved comparison's interval
        cleared its noise floor; within_noise when it did not; unknown_spread for a record
        with no comparison (a single figure, an import, an older record)."""
        comparison = self.feedback.comparison
        if comparison is None:
            return "unknown_spread"
        return "within_noise" if comparison.outcome == "neutral" else "significant"

    @property
    def single_figure(self) -> bool:
        """Timed, with a verdict read from one figure against another and no interval: the
        rule before interleaved comparisons, whose A/A verdicts were false 123 times in 192.
        A run's baseline is timed against nothing: its figure is the start, no verdict."""
        return self.feedback.timing_available and self.feedback.comparison is None \
            and self.provenance.round_kind != "baseline"

    def without_timing(self, why: str) -> ExperienceRecord:
        """This edit with its correctness kept and its timing and verdict dropped (a new id):
        how a single-figure record is shipped, so the edit still serves as an example and
        no count of what worked reads its figure."""
        fb = self.feedback
        untimed = Feedback(
            stage="correctness" if fb.stage == "performance" else fb.stage,
            error_kind=fb.error_kind, error_message=fb.error_message,
            failing_shapes=fb.failing_shapes, max_abs_err=fb.max_abs_err,
            max_rel_err=fb.max_rel_err, mean_abs_err=fb.mean_abs_err, bias=fb.bias,
            mismatch_share=fb.mismatch_share, registers=fb.registers, spills=fb.spills,
            smem_bytes=fb.smem_bytes, text=f"correctness: pass · untimed: {why}")
        data = self.model_dump(exclude={"id", "feedback", "verdict"})
        return ExperienceRecord(**data, feedback=untimed, verdict=Verdict.neutral)

    @property
    def evidence(self) -> Literal["measured", "verified", "claimed"]:
        """measured: correct and timed on a GPU; verified: correct, untimed; else claimed."""
        fb = self.feedback
        correct = fb.stage == "performance" or (fb.stage == "correctness" and not fb.error_kind)
        if correct and fb.timing_available and fb.time_ms is not None and not fb.suspect:
            return "measured"
        if correct:
            return "verified"
        return "claimed"

    def embedding_text(self) -> str:
        """The natural-language side of an experience, for the vector index.

        Short on purpose: MiniLM's cost grows with tokens (on a 2-core CPU ~80 texts/s at
        ~53 tokens, ~190/s at ~25). GPU, arch, dtype, verdict and speedup are SQL columns
        that the ladder filters and the ranking weighs, so they are left out of the text.
        """
        fb = self.feedback
        parts = [f"{self.task.op_type}: [{' '.join(self.edit.categories)}] {self.edit.summary}"]
        if fb.bottleneck_hint:
            parts.append(fb.bottleneck_hint)
        if fb.error_kind:
            parts.append(f"{fb.error_kind}: {(fb.error_message or '')[:120]}")
        return " | ".join(parts)


def parse_record(data: dict[str, Any]) -> ExperienceRecord:
    """Validate one record; raises pydantic.ValidationError with field-level messages."""
    return ExperienceRecord.model_validate(data)
