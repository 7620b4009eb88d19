"""What the caller asks: op, hardware, Triton version, current source and/or feedback."""

from __future__ import annotations

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    field_validator,
)

from kernelkb.kb import limits


class RetrievalQuery(BaseModel):
    # bounds of kb/limits.py: finite numbers, valid text, names <= SHORT characters; an
    # unknown key (a misspelt "top_k") or a number or flag given as a string or true/false
    # is an error, never silently the default
    model_config = ConfigDict(allow_inf_nan=False, str_max_length=limits.SHORT,
                              extra="forbid")

    # one vocabulary at every door: "op" and "limit" (the older "op_type" and "k" are still
    # taken); Python callers keep the attribute names
    op_type: str = Field(min_length=1, validation_alias=AliasChoices("op", "op_type"),
                         description="the op, e.g. softmax ('op_type': its older name)")
    task_id: str | None = None
    dtype: str | None = None  # soft: a match ranks higher, a mismatch is not dropped
    gpu_name: str | None = None
    arch: str | None = None
    triton_version: str | None = None
    regime: str | None = Field(
        default=None, description="the task's shape regime (e.g. long_rows): the op's own "
        "experiences must have been measured on shapes of it")
    kernel_source: str | None = Field(default=None, max_length=limits.SOURCE)
    feedback_text: str | None = Field(default=None, max_length=limits.LONG_TEXT)
    k: StrictInt = Field(default=5, ge=1, le=50, validation_alias=AliasChoices("limit", "k"),
                         description="experiences returned at most ('k': its older name)")
    max_warnings: StrictInt = Field(default=3, ge=0, le=20)
    exclude_tasks: list[str] = Field(default_factory=list, max_length=limits.LIST_ITEMS,
                                     description="held-out tasks")
    include_related: StrictBool = True
    related_ops: list[str] | None = Field(
        default=None, description="ops whose experiences may fill the slots the op's own "
        "leave empty: the task's declared Task.related_ops. None: the entry module (CLI, "
        "HTTP API) fills them from the kernels registry by op_type; [] for none")
    max_chars: StrictInt = Field(default=4000, ge=200, le=1_000_000,
                           description="budget of the few-shot block")
    check_names: StrictBool = Field(
        default=True, description="match op, task, GPU and arch names to the known ones "
        "(any case, short forms such as 'h200') and reject a name nobody knows; the "
        "optimizer sends False for the card and task it runs, which may be new")

    @field_validator("*")
    @classmethod
    def _valid_text(cls, value: object) -> object:
        return limits.check_strings(value)

    @field_validator("regime")
    @classmethod
    def _regime_name(cls, value: str | None) -> str | None:
        return limits.check_regime(value)

    def relatives(self) -> tuple[str, ...]:
        """The related ops this query may fall back on (none when switched off)."""
        if not self.include_related or not self.related_ops:
            return ()
        return tuple(dict.fromkeys(op for op in self.related_ops if op != self.op_type))

    def embedding_text(self) -> str:
        """Shaped like ExperienceRecord.embedding_text ("op: what happened"), so the two
        meet in one space; hardware and dtype are SQL filters, not text."""
        if self.feedback_text:
            return f"{self.op_type}: {self.feedback_text[:400]}"
        if self.kernel_source:
            return f"{self.op_type}: {' '.join(self.kernel_source.split())[:300]}"
        return self.op_type
