"""The hardware a bootstrap plan is for, typed: a wrong type is a 422, not a crash later."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, field_validator

from kernelkb.kb.limits import BANDWIDTH_GBPS, COUNT_MAX, PEAK_TFLOPS, SHORT, check_strings


class BootstrapTarget(BaseModel):
    """The fields of ``kb.record.Environment``, all optional; similarity uses the first
    five, the rest are accepted so a full environment can be sent as it is."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, str_max_length=SHORT)

    gpu_name: str | None = None
    arch: str | None = None
    sm_count: StrictInt | None = Field(None, ge=1, le=COUNT_MAX)
    mem_bandwidth_gbps: StrictFloat | None = Field(None, ge=BANDWIDTH_GBPS[0], le=BANDWIDTH_GBPS[1])
    smem_per_sm_kib: StrictInt | None = Field(None, ge=1, le=COUNT_MAX)
    peak_tflops: StrictFloat | None = Field(None, ge=PEAK_TFLOPS[0], le=PEAK_TFLOPS[1])
    triton_version: str | None = None
    torch_version: str | None = None
    cuda_version: str | None = None
    vendor: str | None = None

    @field_validator("*")
    @classmethod
    def _storable_text(cls, value: object) -> object:
        return check_strings(value)
