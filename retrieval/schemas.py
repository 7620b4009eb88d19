"""Result models of the read side, shared by the in-process facade and the HTTP API."""

from __future__ import annotations

from pydantic import BaseModel, Field

from kernelkb.kb.record import ExperienceRecord


class Hit(BaseModel):
    id: str
    score: float = Field(description="final score: similarity fused, then weighed by evidence")
    rung: str = Field(description="ladder rung that found it, e.g. same_gpu_triton")
    similarity: float | None = Field(default=None, description="cosine to the query text")
    lexical_rank: int | None = Field(default=None, description="BM25 rank among candidates")
    evidence: str
    support: int = Field(description="winning experiences with the same categories here")
    related: bool = Field(default=False, description="from a related op, not the query's own: it "
                          "fills a slot the op's own experiences left empty")
    version_note: str | None = Field(default=None, description="set when measured under another "
                                     "Triton version than the query's")
    record: ExperienceRecord


class RetrievalResult(BaseModel):
    hits: list[Hit]
    warnings: list[Hit] = Field(description="tried on this hardware and lost")
    rungs_used: list[str]
    candidates: int
    prompt_block: str
    timings_ms: dict[str, float] = Field(default_factory=dict)


class CategoryInsight(BaseModel):
    category: str
    count: int
    wins: int
    significant_wins: int = Field(default=0, description="wins whose interleaved comparison's 95% "
                                  "interval cleared the noise floor (the rest: a single "
                                  "figure or no known spread)")
    win_rate: float
    median_speedup: float | None = Field(description="median speedup vs the parent kernel "
                                         "over the category's timed wins")
    best_speedup: float | None = Field(description="best speedup vs the parent kernel over "
                                       "the same wins")
    gains: int = Field(default=0, description="how many timed wins the median and best are over")
    losses: int
    example_ids: list[str]
    other_version: int = Field(default=0, description="rows measured under another Triton version "
                               "than the report's current_triton")
    other_version_wins: int = 0
    version_note: str | None = None


class InsightReport(BaseModel):
    op_type: str | None
    gpu_name: str | None
    arch: str | None
    triton_version: str | None
    current_triton: str | None = None
    regime: str | None = None
    total: int
    categories: list[CategoryInsight]
    # what the figures are computed over (retrieval/insights.py), and why an answer is empty
    basis: str = ""
    note: str | None = None
    sweep_measurements: int = Field(default=0, description="configurations measured with no parent "
                                    "kernel (imported tuning data) under the same filters: "
                                    "not edits, so not counted as tries that won or lost")


class HardwareMatch(BaseModel):
    hardware_id: str
    gpu_name: str
    arch: str
    similarity: float
    experiences: int
    sm_count: int | None = None
    mem_bandwidth_gbps: float | None = None


class PlanItem(BaseModel):
    kind: str = Field(description="'edit' (a category) or 'config' (concrete values)")
    category: str
    config: dict[str, int | float | str | bool] = Field(default_factory=dict)
    from_hardware: str
    evidence: str = Field(description="why: wins / tries, speedups, example ids")
    example_ids: list[str]
    score: float
    task_id: str | None = Field(default=None,
                                description="for a config: the task it was measured on")
    dtype: str | None = None
    similarity: float | None = Field(default=None, description="of its hardware to the target")
    triton_version: str | None = Field(default=None, description="for a config: its Triton version")
    version_note: str | None = Field(default=None, description="set when measured under another "
                                     "Triton version than the target's")


class RankedNeighbour(BaseModel):
    gpu: str
    similarity: float = Field(description="of that GPU's facts to the target's")
    rel_time: float | None = Field(description="its time / that GPU's best there; None: failed")
    rank_pct: float = Field(description="0 = that GPU's best configuration, 1 = its worst")
    shape: str


class RankedItem(BaseModel):
    rank: int
    config: dict[str, int | float | str | bool]
    predicted_rel_time: float | None = Field(
        description="predicted time / the target's best time (geomean over the shapes); "
                    "a model's estimate, not a measurement")
    predicted_rel_low: float | None = Field(default=None, description="low end of the prediction's "
                                            "interval (Prediction.interval_level); None: "
                                            "no calibrated interval (interval_note says why)")
    predicted_rel_high: float | None = Field(default=None, description="high end of the same "
                                             "interval")
    measured_rel_time: float | None = Field(default=None, description="measured on the target, "
                                            "where it was")
    evidence: list[str]
    neighbours: list[RankedNeighbour] = Field(default_factory=list)


class Prediction(BaseModel):
    """The learned ranker's order of an op's configurations on the target GPU."""

    op_type: str
    task_id: str | None
    target_gpu: str
    candidates: int = Field(description="configurations ranked (items holds the first)")
    shapes: list[str]
    trained_on: dict[str, int] = Field(description="GPU -> measurements learned from")
    target_measurements: int = Field(description="configurations measured on the target")
    items: list[RankedItem]
    note: str
    interval_level: float | None = Field(default=None, description="share of measured relative "
                                         "times the items' intervals are calibrated to hold "
                                         "(0.8); None: no interval")
    interval_method: str | None = Field(default=None, description="how the intervals were "
                                        "calibrated")
    interval_note: str | None = Field(default=None, description="what the intervals stand on, or "
                                      "why there are none")


class BootstrapPlan(BaseModel):
    target: dict[str, str | int | float | None]
    similar_hardware: list[HardwareMatch]
    items: list[PlanItem]
    prediction: Prediction | None = Field(default=None, description="ranked configurations from "
                                          "the learned cost model (with an op)")
    prediction_note: str | None = Field(default=None, description="why there is no prediction")
    try_first: PlanItem | None = Field(default=None, description="the one configuration or edit "
                                       "to try first: the ranker's first where the target "
                                       "measured nothing of the op, else the best measured "
                                       "(retrieval/first_try.py)")
    warnings: list[str] = Field(default_factory=list, description="what the plan stands on "
                                "and lacks: facts taken from the architecture, the nearest "
                                "measured hardware far from the target")
