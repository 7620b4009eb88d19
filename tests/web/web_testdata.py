"""The record planted in the web tests' store: markup in every free-text field, which the
pages must show as text and never run."""

from __future__ import annotations

from kb_testdata import record_dict

PLANT = "<script>window.__planted = 1</script><img src=x onerror='window.__planted=2'>"
PLANTED_RUN = "planted-run-1"


def planted_record() -> dict:
    """A record whose every free-text field carries markup that must be shown, not run."""
    rec = record_dict(op="softmax", hw="H200", triton="3.6.0", run=PLANTED_RUN,
                      summary=f"planted {PLANT}", diff=f"--- a\n+++ b\n-x = 1\n+{PLANT}\n")
    rec["edit"]["rationale"] = f"because {PLANT}"
    rec["feedback"]["text"] = f"feedback {PLANT}"
    rec["feedback"]["bottleneck_hint"] = f"hint {PLANT}"
    rec["env"]["gpu_name"] = "NVIDIA H200"
    return rec
