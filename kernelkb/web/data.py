"""What the pages shape from the store's views (``retrieval.views``, read through
``LocalKnowledge.views``): a configuration as one line, the ranker's predictions as
points of the landscape."""

from __future__ import annotations

from typing import Any

from kernelkb.retrieval.views import Point, launch_facts


def config_text(config: dict[str, Any], limit: int = 240) -> str:
    text = ", ".join(f"{k}={v}" for k, v in config.items())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def predicted_points(prediction: Any, best_ms: float | None, launch_of_config: Any = None,
                     shape: str = "") -> list[Point]:
    """The ranker's predicted configurations as points: predicted_rel_time is time over
    the target's best measured time, so a point's time is that ratio x the best time on
    the shape (none without a measured best to scale by)."""
    if prediction is None or not best_ms:
        return []
    out = []
    for item in prediction.items:
        if item.predicted_rel_time is None or not item.config:
            continue
        out.append(Point(dict(item.config), item.predicted_rel_time * best_ms, None,
                         *launch_facts(launch_of_config, item.config, shape)))
    return out
