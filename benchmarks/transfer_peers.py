"""The sequential walks of benchmarks/transfer_gpus.py: the RGPE peer and the product's.

Both draw on one scikit-learn GP per training GPU over the op's knob values (its log
relative times, mean over the shapes), fit once per (op, GPU, seed) and shared by every
held-out target whose training set has that GPU. The peer is plain RGPE over those GPs
and the target's own (retrieval/transfer_bo.py); the product's walk
(retrieval/walk.py) adds the learned ranker's zero-shot order to the same ensemble.
Each walks up to ``limit`` proposals, one measurement at a time, and stops within 3% of
the target's best; the rest follows the ensemble's last order.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from kernelkb.retrieval.ranker import CostModel, ExperienceRow
from kernelkb.retrieval.transfer_bo import RGPE, Encoder, SourceGP, fit_gp
from kernelkb.retrieval.walk import (
    MIXTURE,
    Walk,
    WalkChoice,
    choose_unseen_walk,
    source_targets,
)

TOLERANCE = 1.03


class Walks:
    """Source GPs per (op, GPU, seed), kept across targets; the encoder per op is fit on
    configurations alone (no times), so it sees nothing of a target's measurements."""

    def __init__(self, rows: Sequence[ExperienceRow], limit: int = 200):
        configs: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        for r in rows:
            configs[r.op].setdefault(r.key, r.config)
        self.configs = configs
        self.encoders = {op: Encoder(list(c.values())) for op, c in configs.items()}
        self.limit = limit
        self._gps: dict[tuple[str, str, int], Any] = {}
        self.last_choice = WalkChoice(None)

    def gps(self, op: str, train: Sequence[ExperienceRow], seed: int) -> dict[str, Any]:
        """Training GPU -> its GP over ``op`` (fit on first use)."""
        out = {}
        for gpu, (configs, y) in sorted(source_targets(train, op).items()):
            ident = (op, gpu, seed)
            if ident not in self._gps:
                self._gps[ident] = fit_gp(self.encoders[op](configs), y, seed)
            out[gpu] = self._gps[ident]
        return out

    def rgpe(self, op: str, truth: dict[str, float | None], train: Sequence[ExperienceRow],
             seed: int) -> list[str]:
        """The peer: RGPE over the training GPUs' GPs and the target's."""
        keys = sorted(truth)
        x = self.encoders[op]([self.configs[op][k] for k in keys])
        models = [SourceGP.over(g, gp, x) for g, gp in self.gps(op, train, seed).items()]
        walk = RGPE(models, x, seed)
        best = min(t for t in truth.values() if t is not None)
        walked: list[int] = []
        for _ in range(min(self.limit, len(keys))):
            i = walk.next(set(walked))
            walked.append(i)
            t = truth[keys[i]]
            walk.observe(i, math.log(t) if t is not None else None)
            if t is not None and t <= best * TOLERANCE:
                break
        rest = walk.ranking(set(walked)) if len(walked) < len(keys) else []
        return [keys[i] for i in walked + rest]

    def product(self, rows: Sequence[ExperienceRow], truth: dict[str, float | None],
                train: Sequence[ExperienceRow], model: CostModel, seed: int,
                keep_lead: bool = True, before: bool = False
                ) -> tuple[list[str], dict[str, float]]:
        """The product's walk (retrieval/walk.py) over the target's ``rows`` (their times
        are read only as each is measured); also the ensemble's last weights. For a task
        no training GPU measured, the prior-mean mixture (``MIXTURE``; ``last_choice``
        named "mixture"). ``before``: for such a task, the walk as it was before the
        mixture, one variant chosen per target on the training tasks
        (``choose_unseen_walk``; kept in ``last_choice``), for the report's before/after."""
        op = rows[0].op
        candidates = [ExperienceRow(op=r.op, shape=r.shape, gpu=r.gpu, config=r.config,
                                    time_ms=None, launch=r.launch, gpu_facts=r.gpu_facts,
                                    bytes_moved=r.bytes_moved, flops=r.flops) for r in rows]
        measured: dict[str, list[ExperienceRow]] = defaultdict(list)
        for r in rows:
            measured[r.key].append(r)
        gps = self.gps(op, train, seed) if op in self.encoders else {}
        encode = self.encoders.get(op) or Encoder([r.config for r in rows])
        self.last_choice = WalkChoice(None)
        unseen = not gps and op not in model.train_ops
        if unseen and before:
            self.last_choice = choose_unseen_walk(model, train, rows[0].gpu, seed, self.limit)
        elif unseen:
            self.last_choice = WalkChoice(None, name_as="mixture")
        walk = Walk(model, candidates, gps, encode, seed, keep_lead,
                    prior=self.last_choice.prior,
                    mixture=MIXTURE if unseen and not before else None)
        best = min(t for t in truth.values() if t is not None)
        for _ in range(min(self.limit, len(truth))):
            key = walk.next_key()
            if key is None:
                break
            walk.observe(key, measured[key])
            t = truth.get(key)
            if t is not None and t <= best * TOLERANCE:
                break
        return walk.remaining(), walk.weights()

