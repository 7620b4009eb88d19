"""RGPE (retrieval/transfer_bo.py) and the product's walk (retrieval/walk.py) on small
generated spaces: the encoder's scales, the weights following the source that orders the
target's measurements as measured, the walk's lead and its sequence."""

from __future__ import annotations

import math
import random

import numpy as np

from kernelkb.retrieval.ranker import CostModel, ExperienceRow
from kernelkb.retrieval.transfer_bo import RGPE, Encoder, OrderPrior, SourceGP, fit_gp
from kernelkb.retrieval.walk import Walk, fit_sources, replay

SPACE = [{"block": b, "tile": t, "shmem": s} for b in (16, 32, 64, 128, 256, 512)
         for t in (1, 2, 3, 4) for s in (False, True)]


def landscape(config: dict, best_block: float, noise: float, rng: random.Random) -> float:
    """A log time with its best at ``best_block`` and tile 2."""
    return (0.4 * abs(math.log2(config["block"]) - best_block) + 0.2 * abs(config["tile"] - 2)
            + 0.1 * config["shmem"] + noise * rng.random())


def test_encoder_scales_knobs_to_unit_range() -> None:
    configs = [*SPACE, {"block": 16, "tile": 1, "shmem": False, "name": "a"}]
    x = Encoder(configs)(configs)
    assert x.min() == 0.0 and x.max() == 1.0
    # block spans 32x: log2, so 16 -> 0, 64 -> 0.4, 512 -> 1 (evenly spaced in log)
    enc = Encoder(SPACE)
    blocks = enc([{"block": b, "tile": 1, "shmem": False} for b in (16, 64, 512)])[:, 0]
    assert np.allclose(blocks, [0.0, 0.4, 1.0])
    assert len(Encoder([{"a": 1, "b": 2}, {"a": 1, "b": 3}]).columns) == 1  # a is constant


def test_weights_follow_the_source_that_orders_like_the_target() -> None:
    rng = random.Random(0)
    x = Encoder(SPACE)(SPACE)
    alike = np.array([landscape(c, 6, 0.05, rng) for c in SPACE])
    opposite = -alike
    target = [landscape(c, 6, 0.05, rng) for c in SPACE]
    sources = [SourceGP.over("alike", fit_gp(x, alike), x),
               SourceGP.over("opposite", fit_gp(x, opposite), x)]
    walk = RGPE(sources, x, seed=0)
    for i in random.Random(1).sample(range(len(SPACE)), 10):
        walk.observe(i, target[i])
    walk.ranking(set())
    assert walk.weights[0] > 0.5 > walk.weights[1]
    assert math.isclose(float(walk.weights.sum()), 1.0)


def test_lead_proposes_first_and_a_misleading_lead_gives_way() -> None:
    rng = random.Random(2)
    x = Encoder(SPACE)(SPACE)
    target = [landscape(c, 8, 0.02, rng) for c in SPACE]
    # the lead's order is the target's reversed: its first proposal is the worst
    lead = OrderPrior.of("wrong", np.argsort(np.argsort(-np.array(target))).astype(float))
    source = SourceGP.over("alike", fit_gp(x, np.array(target)), x)
    walk = RGPE([lead, source], x, seed=0, lead=0)
    seen: list[int] = []
    for _ in range(12):
        i = walk.next(set(seen))
        if not seen:
            assert i == int(np.argmax(target))  # the lead alone decides the first
        seen.append(i)
        walk.observe(i, target[i])
    assert walk.weights[1] > walk.weights[0]
    best = min(target)
    assert min(target[i] for i in seen) <= best + math.log(1.03)


def toy_rows(gpu: str, best_block: float, seed: int) -> list[ExperienceRow]:
    rng = random.Random(seed)
    facts = {"gpu_name": gpu, "vendor": "nvidia", "sm_count": 80 + 10 * seed}
    return [
        ExperienceRow(op="toy", shape="n=4096", gpu=gpu, config=dict(c),
                      time_ms=math.exp(landscape(c, best_block, 0.05, rng)), launch=None,
                      gpu_facts=facts) for c in SPACE]


def test_walk_leads_with_the_ranker_and_visits_each_configuration_once() -> None:
    train = toy_rows("GPU A", 6, 0) + toy_rows("GPU B", 6.5, 1) + toy_rows("GPU C", 7, 2)
    target = toy_rows("GPU D", 7, 3)
    model = CostModel(n_estimators=20).fit(train)
    encode = Encoder(SPACE)
    candidates = [ExperienceRow(op=r.op, shape=r.shape, gpu=r.gpu, config=r.config,
                                time_ms=None, launch=None, gpu_facts=r.gpu_facts)
                  for r in target]
    walk = Walk(model, candidates, fit_sources(train, "toy", encode), encode)
    assert walk.next_key() == walk.keys[0]  # the ranker's zero-shot first
    measured = {r.key: r for r in target}
    for _ in range(6):
        key = walk.next_key()
        walk.observe(key, [measured[key]])
    order = walk.remaining()
    assert sorted(order) == sorted(measured) and len(set(order[:6])) == 6
    weights = walk.weights()
    assert set(weights) == {"learned ranker", "GPU A", "GPU B", "GPU C", "target"}
    assert math.isclose(sum(weights.values()), 1.0)


def test_replay_proposes_only_what_the_target_has_not_measured() -> None:
    train = toy_rows("GPU A", 6, 0) + toy_rows("GPU B", 7, 1)
    target = toy_rows("GPU D", 7, 3)
    model = CostModel(n_estimators=20).fit(train)
    candidates = [ExperienceRow(op=r.op, shape=r.shape, gpu=r.gpu, config=r.config,
                                time_ms=None, launch=None, gpu_facts=r.gpu_facts)
                  for r in target]
    measured = target[:5]
    order = replay(model, candidates, train, measured)
    assert sorted(order) == sorted(r.key for r in target[5:])


def test_a_lead_not_kept_leaves_the_ensemble_once_it_hands_over() -> None:
    x = Encoder(SPACE)(SPACE)
    target = [landscape(c, 8, 0.02, random.Random(4)) for c in SPACE]
    lead = OrderPrior.of("lead", np.arange(len(SPACE), dtype=float))
    source = SourceGP.over("alike", fit_gp(x, np.array(target)), x)
    walk = RGPE([lead, source], x, seed=0, lead=0, keep_lead=False)
    assert walk.next(set()) == 0  # the lead's first
    for i in range(6):
        walk.observe(i, target[i])
    walk.ranking(set())
    assert walk.weights[0] == 0.0 and math.isclose(float(walk.weights.sum()), 1.0)


def test_the_prior_mean_walk_leads_with_the_prior_and_leaves_a_wrong_one() -> None:
    """PriorMeanGP: its first two proposals are the prior's; a prior that orders the space
    the wrong way round still reaches within 3% of the best well before a walk down the
    prior would, and sooner when the prior's coefficient is learned (it goes negative)
    than when it is held at its weight."""
    from kernelkb.retrieval.transfer_bo import PriorMeanGP

    x = Encoder(SPACE)(SPACE)
    target = [landscape(c, 7, 0.02, random.Random(5)) for c in SPACE]
    right = OrderPrior.of("right", np.argsort(np.argsort(target)).astype(float))
    wrong = OrderPrior.of("wrong", np.argsort(np.argsort(-np.array(target))).astype(float))
    walk = PriorMeanGP(right, x, 0.5, 1.0)
    assert walk.next(set()) == int(np.argmin(target))

    def e3(prior: OrderPrior, learn: bool) -> int:
        walk = PriorMeanGP(prior, x, 0.5, 1.0, learn_scale=learn)
        seen: list[int] = []
        while True:
            i = walk.next(set(seen))
            seen.append(i)
            walk.observe(i, target[i])
            if target[i] <= min(target) + math.log(1.03):
                return len(seen)

    good = sum(t <= min(target) + math.log(1.03) for t in target)
    down_the_prior = len(SPACE) - good + 1  # the wrong prior's order meets them last
    learned, held = e3(wrong, True), e3(wrong, False)
    assert learned < down_the_prior // 2
    assert learned <= held
    assert math.isclose(float(walk.weights.sum()), 1.0)


def test_an_unseen_task_walk_is_chosen_on_the_training_tasks_alone() -> None:
    """choose_unseen_walk (the rule before the mixture, the benchmark's before column)
    holds each training task out in turn (the model refit without it) and scores every
    variant by its walks there; it never sees the target. With one training task there
    is nothing to hold out: the ensemble, unchosen."""
    from kernelkb.retrieval.walk import (
        CHOSEN_LENGTHS,
        PRIOR_WEIGHTS,
        choose_unseen_walk,
        unmeasured,
        variant_name,
    )

    def task(op: str, best_block: float, seed: int) -> list[ExperienceRow]:
        return [ExperienceRow(op=op, shape=r.shape, gpu="GPU A", config=r.config,
                              time_ms=r.time_ms, launch=None, gpu_facts=r.gpu_facts)
                for r in toy_rows("GPU A", best_block, seed)]

    train = task("one", 6, 0) + task("two", 7, 1) + task("three", 8, 2)
    model = CostModel(n_estimators=20).fit(train)
    choice = choose_unseen_walk(model, train, "GPU A")
    assert choice.folds == ("one", "three", "two")
    names = {"ensemble"} | {variant_name((w, n)) for w in PRIOR_WEIGHTS
                            for n in CHOSEN_LENGTHS}
    assert set(choice.scores) == names
    assert choice.scores[choice.name] == min(choice.scores.values())
    alone = choose_unseen_walk(model, task("one", 6, 0), "GPU A")
    assert alone.prior is None and not alone.scores
    # replay of a task no GPU measured takes the mixture walk: every unmeasured key once
    target = task("four", 7, 3)
    order = replay(model, unmeasured(target), train, target[:3])
    assert sorted(order) == sorted(r.key for r in target[3:])


def test_the_prior_mean_mixture_of_one_is_that_walk_and_of_many_leaves_a_wrong_prior() -> None:
    """PriorMeanMixture: with one (weight, length) it proposes as that PriorMeanGP does;
    over the grid (walk.MIXTURE) its first proposal is the prior's, and a prior that
    orders the space the wrong way round is left well before a walk down it."""
    from kernelkb.retrieval.transfer_bo import PriorMeanGP, PriorMeanMixture
    from kernelkb.retrieval.walk import MIXTURE

    x = Encoder(SPACE)(SPACE)
    target = [landscape(c, 7, 0.02, random.Random(5)) for c in SPACE]
    wrong = OrderPrior.of("wrong", np.argsort(np.argsort(-np.array(target))).astype(float))
    one, alone = PriorMeanMixture(wrong, x, [(0.5, 1.0)]), PriorMeanGP(wrong, x, 0.5, 1.0)
    for i in (3, 17, 40):
        one.observe(i, target[i])
        alone.observe(i, target[i])
    assert one.ranking(set()) == alone.ranking(set())

    mixture = PriorMeanMixture(wrong, x, MIXTURE)
    assert mixture.next(set()) == int(np.argmax(target))  # the (wrong) prior's first
    seen: list[int] = []
    while not seen or target[seen[-1]] > min(target) + math.log(1.03):
        seen.append(mixture.next(set(seen)))
        mixture.observe(seen[-1], target[seen[-1]])
    good = sum(t <= min(target) + math.log(1.03) for t in target)
    assert len(seen) < (len(SPACE) - good + 1) // 2
    assert len(set(seen)) == len(seen)
    assert math.isclose(float(mixture.weights.sum()), 1.0)
