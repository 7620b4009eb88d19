"""Render an EvalResult as the compact text the agent reads, and the bottleneck hint.

Shape of the text (DESIGN.md): one line per layer reached, numbers first, then the
shapes that failed or regressed, so the agent sees what to fix without a traceback.
"""

from __future__ import annotations

from kernelkb.kernels.shared.stats import geomean
from kernelkb.optimizer.sandbox.result import EvalResult

REGISTERS_PER_SM = 65536
REGRESSION_SHARE = 0.05  # slower than the parent on a shape by more than this is named
DRIFT_SHARE = 0.05  # an incumbent that now times this much off its own figure is named


def bottleneck_hint(result: EvalResult, *, compute_bound: bool,
                    num_warps: int | None, smem_per_sm_kib: int | None) -> str | None:
    """A short, evidence-based guess at what limits the kernel."""
    if result.peak_share is None:
        return None
    notes = []
    share = result.peak_share
    kind = "compute" if compute_bound else "memory"
    if share >= 0.8:
        notes.append(f"{kind}-bound, near roofline; remaining gain is in launch shape "
                     "for small shapes")
    elif share >= 0.5:
        notes.append(f"{kind}-bound at {share:.0%} of peak: check coalescing, vector width "
                     "and the number of passes over the data")
    else:
        notes.append(f"far from the {kind} roofline ({share:.0%}): latency- or launch-bound "
                     "(too few programs, serial loops) or extra passes")
    if result.spills:
        notes.append(f"{result.spills} register spills: smaller tiles or fewer live values")
    if result.registers and num_warps:
        blocks = REGISTERS_PER_SM // max(1, result.registers * num_warps * 32)
        if blocks <= 1:
            notes.append(f"occupancy: {result.registers} regs x {num_warps} warps allow "
                         f"{blocks} program(s) per SM")
    if result.smem_bytes and smem_per_sm_kib:
        blocks = smem_per_sm_kib * 1024 // max(1, result.smem_bytes)
        if blocks <= 1:
            notes.append(f"occupancy: {result.smem_bytes // 1024} KiB smem allows "
                         f"{blocks} program(s) per SM")
    return "; ".join(notes)


def _err_line(r: EvalResult) -> str:
    if r.max_rel_err is None:
        return ""
    bias = "no bias" if r.error_kind != "bias" else f"bias {r.bias:+.1e}"
    return (f"max abs err {r.max_abs_err:.1e}, max rel err {r.max_rel_err:.1e}, "
            f"mean abs {r.mean_abs_err:.0e}, {bias}")


def render(r: EvalResult) -> str:
    """The agent-facing text, with a last line when the candidate ran uncontained."""
    text = _render_layers(r)
    if r.gpu_shared:
        text += f"\n{r.gpu_shared}"
    if r.containment and r.containment.startswith("uncontained"):
        text += (f"\nsandbox: {r.containment}; the candidate ran with a scrubbed environment "
                 "and a fresh working directory only")
    return text


def _render_layers(r: EvalResult) -> str:
    if r.stage in ("syntax", "compile", "run") and r.error_kind:
        head = {"syntax": "syntax", "compile": "compile", "run": "run"}[r.stage]
        lines = [f"{head}: FAILED ({r.error_kind})", r.error_message or ""]
        if r.failing_shapes:
            lines.append("failing shapes: " + "; ".join(r.failing_shapes))
        return "\n".join(ln for ln in lines if ln)
    if r.error_kind:
        lines = [f"compile: ok · run: ok · correctness: FAILED ({r.error_kind})"]
        if r.max_abs_err is not None:
            lines.append(_err_line(r) + f", {r.mismatch_share:.1%} of elements over tolerance")
        lines.append(r.error_message or "")
        lines.append("failing shapes: " + "; ".join(r.failing_shapes))
        return "\n".join(ln for ln in lines if ln)
    lines = [f"compile: ok · correctness: pass on {len(r.shapes_checked)} shapes ({_err_line(r)})"]
    if r.judge.get("spot_checked"):
        lines.append("judge: re-ran (" + "), (".join(r.judge["spot_checked"]) +
                     ") on fresh inputs outside the candidate's process: pass")
    also = []
    if isinstance(other := r.judge.get("other_dtypes"), dict):
        also.append(f"in {', '.join(other.get('dtypes') or [])} on ({other.get('shape')})")
    if r.judge.get("big_shape"):
        also.append(f"on ({r.judge['big_shape']}), past the largest shape asked")
    if also:
        lines.append("judge: also checked " + "; ".join(also) + ": pass")
    if not r.timing_available:
        lines.append(f"time: unavailable ({r.timing_note or 'no GPU'})")
        return "\n".join(lines)
    basis = "GPU time" if r.gpu_timings else "call time"
    time_line = f"time: {r.time_ms:.4g} ms {basis} (geomean of {len(r.timings)} shapes)"
    iqrs = [iqr for _, iqr in (r.gpu_timings or r.timings).values()]
    if iqrs:
        time_line += f" (max IQR {max(iqrs):.2g})"
    if r.gpu_timings and r.timings:
        calls = [med for med, _ in r.timings.values()]
        time_line += f" · call time {geomean(calls):.4g} ms"
    if r.host_timings:
        time_line += f" · host {geomean(list(r.host_timings.values())):.3g} ms per call"
    if r.busy_timings:
        time_line += (f" · GPU busy {geomean(list(r.busy_timings.values())):.4g} ms per call "
                      "(its own timestamps, all streams)")
        if len(r.busy_timings) < len(r.gpu_timings):
            time_line += (f" on {len(r.busy_timings)} of {len(r.gpu_timings)} shapes (the "
                          "others' intervals rule out a gain over the incumbent)")
    refs = []
    if r.baseline_ms:
        refs.append(f"baseline {r.baseline_ms:.4g} ms")
    if r.parent_ms:
        refs.append(f"parent {r.parent_ms:.4g} ms")
    ups = [f"{s:.2f}x" for s in (r.speedup_vs_baseline, r.speedup_vs_parent) if s]
    if refs:
        time_line += " · " + " · ".join(refs) + " → " + " / ".join(ups)
    lines.append(time_line)
    if r.comparison:
        c = r.comparison
        line = (f"vs parent, interleaved: {c.ratio:.3f}x [{c.low:.3f}, {c.high:.3f}] "
                f"(95%, {c.rounds} rounds, noise floor {c.noise_floor:.0%}) → "
                f"{c.outcome.value}")
        if r.incumbent_drift is not None and abs(r.incumbent_drift - 1) > DRIFT_SHARE:
            line += f" · parent drifted {r.incumbent_drift - 1:+.0%} since it was measured"
        lines.append(line)
    perf = []
    if r.achieved_gbps is not None:
        perf.append(f"achieved {r.achieved_gbps / 1000:.2f} TB/s")
    if r.achieved_tflops is not None and r.achieved_tflops >= 0.01:
        perf.append(f"{r.achieved_tflops:.1f} TFLOP/s")
    if r.peak_share is not None:
        perf.append(f"= {r.peak_share:.0%} of peak")
    res = [f"{r.registers} regs" if r.registers is not None else None,
           f"{r.spills} spills" if r.spills is not None else None,
           f"{r.smem_bytes // 1024} KiB smem" if r.smem_bytes is not None else None]
    line = " ".join(perf)
    if any(res):
        line += " · " + ", ".join(x for x in res if x)
    if r.bottleneck_hint:
        line += f" · hint: {r.bottleneck_hint}"
    lines.append(line)
    if r.regressions:
        worst = sorted(r.regressions.items(), key=lambda kv: -kv[1])[:3]
        lines.append("shape sweep: slower than parent on " +
                     ", ".join(f"({k}) by {v:.0%}" for k, v in worst))
    if r.parent_retimed and not r.comparison:
        lines.append("parent re-timed beside this candidate on " + ", ".join(
            f"({k}): {r.parent_timings[k]:.4g} ms, not the earlier {v:.4g} ms"
            for k, v in r.parent_retimed.items() if k in r.parent_timings))
    if r.suspect:
        lines.append("SUSPECT timing, not trusted: " + "; ".join(r.suspect_reasons[:3]))
    return "\n".join(lines)
