"""Transfer Bayesian optimisation: a ranking-weighted ensemble of Gaussian processes (RGPE).

Why: a walk on a new card should learn from each measurement, and the field's standard for
that is transfer BO; RGPE (Feurer, Letham & Bakshy, 2018; the transfer method BoTorch's
tutorials build) is its simplest well-understood form. One GP per source GPU over the
configuration's knob values (fit on that GPU's log relative times), one GP over the
target's own measurements, each weighted by how often a draw from it orders the target's
measurements best (the sampled ranking loss; the target's GP by its leave-one-out
predictions); the next configuration maximises expected improvement under the weighted
posterior. The GPs are scikit-learn's (a Matérn 5/2 kernel with one length per knob).
"""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

SAMPLES = 256  # draws per model for the ranking-loss weights
SOURCE_POINTS = 200  # configurations a source GP is fit on (its best fifth, the rest drawn)
WEIGHT_POINTS = 64  # target measurements the weights are computed on (the latest)
# PriorMeanGP: the prior's coefficient learned from the measurements (its weight the
# coefficient's mean) rather than held at its weight. Chosen on training tasks only: over
# the inner folds of leave-one-task-out on the H200 spaces (each held-out task's training
# tasks held out in turn, 6 tasks x 5 model seeds), the best variant's mean log E@3% was
# lower with it in 23 of 30, equal in 2, higher in 5.
LEARN_SCALE = True
PRIOR_LEADS = 1  # PriorMeanGP: measurements before expected improvement takes over (2 before;
# 1 kept as the two above were: its inner-fold score was lower in 19 of 30, equal in 5)


class Encoder:
    """Knob values as numbers in [0, 1]: numbers (log2 where they span >= 4x and are
    positive, as tile sizes do), booleans as 0/1, anything else by its sorted position;
    knobs with one value are dropped."""

    def __init__(self, configs: Sequence[Mapping[str, Any]]):
        self.columns: list[tuple[str, bool, dict[str, float] | None, float, float]] = []
        for name in sorted({k for c in configs for k in c}):
            values = [c.get(name) for c in configs]
            numbers = [_number(v) for v in values]
            if all(n is not None for n in numbers):
                arr = np.array(numbers, dtype=float)
                log = bool(arr.min() > 0 and arr.max() / arr.min() >= 4)
                arr = np.log2(arr) if log else arr
                cats = None
            else:
                labels = sorted({repr(v) for v in values})
                cats = {label: float(i) for i, label in enumerate(labels)}
                arr = np.array([cats[repr(v)] for v in values])
                log = False
            low, high = float(arr.min()), float(arr.max())
            if high > low:
                self.columns.append((name, log, cats, low, high))

    def __call__(self, configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
        out = np.zeros((len(configs), max(1, len(self.columns))))
        for j, (name, log, cats, low, high) in enumerate(self.columns):
            for i, config in enumerate(configs):
                value = config.get(name)
                if cats is not None:
                    x = cats.get(repr(value), 0.0)
                else:
                    x = _number(value) or 0.0
                    x = math.log2(x) if log and x > 0 else x
                out[i, j] = (x - low) / (high - low)
        return out


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


@dataclass
class SourceGP:
    """One source GPU's GP (standardised log relative time) and its posterior over the
    candidates, computed once."""

    name: str
    gp: Any
    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def over(cls, name: str, gp: Any, candidates: np.ndarray) -> SourceGP:
        mean, std = gp.predict(candidates, return_std=True)
        return cls(name, gp, mean, np.maximum(std, 1e-9))

    def draws(self, idx: Sequence[int], x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """SAMPLES joint draws of the GP at candidates ``idx``."""
        mu, cov = self.gp.predict(x[list(idx)], return_cov=True)
        return rng.multivariate_normal(mu, cov + 1e-9 * np.eye(len(idx)), SAMPLES,
                                       method="cholesky")


@dataclass
class OrderPrior:
    """An order of the candidates from elsewhere (the learned ranker's zero-shot order) as
    one more model of the ensemble: position p of N scores the standard normal quantile
    of (p + 0.5) / N, with a spread of ``spread`` standard units, so the ranking-loss
    weights can trust it, or not, by how it orders the target's measurements."""

    name: str
    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def of(cls, name: str, positions: np.ndarray, spread: float = 0.5) -> OrderPrior:
        from scipy.special import ndtri

        n = len(positions)
        return cls(name, ndtri((positions + 0.5) / n), np.full(n, spread))

    def draws(self, idx: Sequence[int], x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        idx = list(idx)
        return self.mean[idx] + self.std[idx] * rng.standard_normal((SAMPLES, len(idx)))


def fit_gp(x: np.ndarray, y: np.ndarray, seed: int = 0, points: int = SOURCE_POINTS) -> Any:
    """A GP on one source GPU's configurations ``x`` and their log relative times ``y``
    (standardised): its best fifth of ``points`` and the rest drawn at random (seeded),
    as the head is what a walk needs right."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

    order = np.argsort(y, kind="stable")
    if len(order) > points:
        head = order[: points // 5]
        rest = random.Random(seed).sample(list(order[points // 5:]), points - len(head))
        order = np.concatenate([head, np.array(rest, dtype=int)])
    xs, ys = x[order], _standardise(y[order])
    d = x.shape[1]
    kernel = ConstantKernel(1.0, (1e-2, 1e2)) * Matern(
        length_scale=np.full(d, 0.5), length_scale_bounds=(1e-2, 1e2), nu=2.5) + \
        WhiteKernel(1e-2, (1e-6, 1.0))
    with warnings.catch_warnings():  # a length at its bound: that knob does not matter
        warnings.simplefilter("ignore", ConvergenceWarning)
        return GaussianProcessRegressor(kernel, normalize_y=False, random_state=seed).fit(xs, ys)


def _default_kernel(d: int) -> Any:
    """Where no source GP lends its kernel: a length of half the unit range per knob."""
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

    return ConstantKernel(1.0) * Matern(np.full(d, 0.5), nu=2.5) + WhiteKernel(1e-2)


def _standardise(y: np.ndarray) -> np.ndarray:
    sd = float(np.std(y))
    return (y - float(np.mean(y))) / (sd if sd > 0 else 1.0)


class RGPE:
    """The ensemble over a fixed candidate set: ``observe`` a measured candidate, ``next``
    the one to measure, ``ranking`` every unmeasured one by the acquisition."""

    def __init__(self, sources: Sequence[SourceGP | OrderPrior], candidates: np.ndarray,
                 seed: int = 0, lead: int | None = None, keep_lead: bool = True):
        """``lead``: the source followed alone until two measurements can be ranked
        (default: all sources alike); ``keep_lead``: whether it stays in the ensemble
        after that, weighted like the others."""
        if not sources:
            raise ValueError("RGPE needs at least one source model")
        self.sources = list(sources)
        self.x = candidates
        self.rng = np.random.default_rng(seed)
        self.lead = lead
        self.keep_lead = keep_lead
        self.observed: dict[int, float] = {}
        self.weights = self._prior_weights()

    def _prior_weights(self) -> np.ndarray:
        weights = np.zeros(len(self.sources) + 1)
        if self.lead is not None:
            weights[self.lead] = 1.0
        else:
            weights[:-1] = 1.0 / len(self.sources)
        return weights

    def observe(self, index: int, log_time: float | None) -> None:
        """A measured candidate's log time; None: it failed (twice the slowest so far)."""
        if log_time is None:
            known = [v for v in self.observed.values() if v is not None]
            log_time = (max(known) + math.log(2.0)) if known else None
        if log_time is not None:
            self.observed[index] = log_time

    def next(self, exclude: set[int]) -> int:
        return self.ranking(exclude, limit=1)[0]

    def ranking(self, exclude: set[int], limit: int | None = None) -> list[int]:
        """Unmeasured candidates (not in ``exclude``) by expected improvement, best first;
        ties (far from any hope of improving) by the posterior mean."""
        mean, std = self._posterior()
        idx = sorted(self.observed)
        best = float(np.min(mean[idx])) if idx else float(np.min(mean))
        z = (best - mean) / std
        ei = std * (z * _norm_cdf(z) + np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi))
        order = np.lexsort((mean, -np.round(ei, 12)))
        out = [int(i) for i in order if int(i) not in exclude]
        return out[:limit] if limit else out

    def _posterior(self) -> tuple[np.ndarray, np.ndarray]:
        target = self._target_gp()
        self.weights = self._weights(target)
        mean = sum(w * s.mean for w, s in zip(self.weights, self.sources, strict=False))
        var = sum(w * w * s.std ** 2 for w, s in zip(self.weights, self.sources, strict=False))
        if target is not None and self.weights[-1] > 0:
            t_mean, t_std = target.predict(self.x, return_std=True)
            mean = mean + self.weights[-1] * t_mean
            var = var + (self.weights[-1] * t_std) ** 2
        return np.asarray(mean), np.sqrt(np.maximum(var, 1e-18))

    def _target_gp(self) -> Any:
        """The target's GP: the kernel of the source weighted highest so far, not
        re-optimised (a few measurements cannot fit a length per knob)."""
        from sklearn.gaussian_process import GaussianProcessRegressor

        if len(self.observed) < 2:
            return None
        idx = sorted(self.observed)
        gps = [(w, s) for w, s in zip(self.weights, self.sources, strict=False)
               if isinstance(s, SourceGP)]
        kernel = max(gps, key=lambda p: p[0])[1].gp.kernel_ if gps else _default_kernel(
            self.x.shape[1])
        y = _standardise(np.array([self.observed[i] for i in idx]))
        return GaussianProcessRegressor(kernel, optimizer=None).fit(self.x[idx], y)

    def _weights(self, target: Any) -> np.ndarray:
        """RGPE's weights: the share of draws in which each model's ranking loss over the
        target's measurements is the least (ties broken at random); a source whose median
        loss is above the target model's 95th percentile is dropped (weight dilution)."""
        n_models = len(self.sources) + 1
        idx = sorted(self.observed)[-WEIGHT_POINTS:]
        if len(idx) < 2:
            return self._prior_weights()
        y = np.array([self.observed[i] for i in idx])
        truth = y[:, None] < y[None, :]
        losses = np.zeros((n_models, SAMPLES))
        for m, source in enumerate(self.sources):
            losses[m] = _ranking_loss(source.draws(idx, self.x, self.rng), truth)
        if target is None:
            losses[-1] = np.inf
        else:
            losses[-1] = _ranking_loss(self._loo_draws(target, idx), truth)
        keep = np.ones(n_models, dtype=bool)
        if self.lead is not None and not self.keep_lead:
            keep[self.lead] = False
        if len(idx) >= 5:
            if np.isfinite(losses[-1]).all():
                keep[:-1] = np.median(losses[:-1], axis=1) <= np.quantile(losses[-1], 0.95)
            keep[-1] = np.isfinite(losses[-1]).all()
        noisy = np.where(keep[:, None], losses, np.inf) + self.rng.random(losses.shape) * 0.5
        winners = np.argmin(noisy, axis=0)
        return np.bincount(winners, minlength=n_models) / SAMPLES

    def _loo_draws(self, target: Any, idx: Sequence[int]) -> np.ndarray:
        """Draws from the target GP's leave-one-out predictions at its own measurements
        (closed form: mean y - [K^-1 y] / [K^-1]_ii, variance 1 / [K^-1]_ii)."""
        y = target.y_train_
        k_inv = np.linalg.inv(target.kernel_(self.x[sorted(self.observed)])
                              + 1e-9 * np.eye(len(y)))
        diag = np.maximum(np.diag(k_inv), 1e-12)
        mean = y - (k_inv @ y) / diag
        sd = np.sqrt(1.0 / diag)
        keep = len(y) - len(idx)
        return mean[keep:] + sd[keep:] * self.rng.standard_normal((SAMPLES, len(idx)))


def _ranking_loss(draws: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Per draw: ordered pairs of measurements the draw orders otherwise than measured."""
    return ((draws[:, :, None] < draws[:, None, :]) ^ truth[None]).sum(axis=(1, 2))


def _norm_cdf(z: np.ndarray) -> np.ndarray:
    from scipy.special import ndtr

    return ndtr(z)


class PriorMeanGP:
    """A walk for a task no training GPU measured (no source GP): one GP over the target's
    own measurements whose prior mean is the learned ranker's order (``OrderPrior``'s
    normal scores) scaled by ``prior_weight``, with a Matérn 5/2 kernel of ``length`` per
    knob (not re-optimised: a few measurements cannot fit it). ``prior_weight`` shrinks
    the ranker toward the cold prior (0: a flat prior, plain BO); the GP fits the
    target's measurements less that prior. Same calls as ``RGPE``: ``observe``,
    ``next``, ``ranking``; ``weights`` is the prior's share and the target GP's.

    Why not the ensemble (RGPE with the order as a member): there the order is a rival
    that either wins or loses the ranking-loss vote, and with two or three measurements
    it wins, so the walk followed the order's first four or five proposals, a cluster of
    near-twins, on every held-out task. As a prior mean it moves with every measurement:
    a bad neighbourhood measured once is left at once."""

    def __init__(self, order: OrderPrior, candidates: np.ndarray, prior_weight: float,
                 length: float, learn_scale: bool | None = None):
        from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

        self.prior = np.asarray(order.mean, dtype=float)
        self.x = candidates
        self.prior_weight = float(prior_weight)
        self.kernel = ConstantKernel(1.0) * Matern(np.full(candidates.shape[1], length),
                                                   nu=2.5) + WhiteKernel(1e-2)
        self.learn_scale = LEARN_SCALE if learn_scale is None else learn_scale
        self.observed: dict[int, float] = {}
        share = self.prior_weight / (1.0 + self.prior_weight)
        self.weights = np.array([share, 1.0 - share])

    def observe(self, index: int, log_time: float | None) -> None:
        """As ``RGPE.observe``: a failure counts as twice the slowest so far."""
        if log_time is None:
            known = list(self.observed.values())
            log_time = (max(known) + math.log(2.0)) if known else None
        if log_time is not None:
            self.observed[index] = log_time

    def next(self, exclude: set[int]) -> int:
        return self.ranking(exclude, limit=1)[0]

    def ranking(self, exclude: set[int], limit: int | None = None) -> list[int]:
        """Unmeasured candidates by expected improvement under the posterior (ties by its
        mean); before PRIOR_LEADS measurements, the prior's order."""
        if len(self.observed) < PRIOR_LEADS:
            order = np.argsort(self.prior, kind="stable")
        else:
            mean, sd, best = self.posterior()
            order = _ei_order(mean, sd, best)
        out = [int(i) for i in order if int(i) not in exclude]
        return out[:limit] if limit else out

    def posterior(self) -> tuple[np.ndarray, np.ndarray, float]:
        """The posterior mean and standard deviation over every candidate, in standardised
        log time, and the best measured (at least one measurement)."""
        idx = sorted(self.observed)
        z = _standardise(np.array([self.observed[i] for i in idx]))
        residual = z - self.prior_weight * self.prior[idx]
        offset = float(np.mean(residual))
        mu, sd = self._posterior(idx, residual - offset)
        mean = self.prior_weight * self.prior + mu + offset
        return mean, np.maximum(sd, 1e-9), float(z.min())

    def _posterior(self, idx: Sequence[int], y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The GP's posterior mean and standard deviation over every candidate given the
        residuals ``y`` at ``idx``. With ``learn_scale`` the kernel also holds the prior
        itself (p(x) p(x'), unit variance): the prior's coefficient is not fixed at
        ``prior_weight`` but has it as its mean and is learned from the measurements,
        down to zero or below where the ranker orders this task the wrong way."""
        x_obs = self.x[list(idx)]
        k_oo = self.kernel(x_obs)
        k_xo = self.kernel(self.x, x_obs)
        k_xx = self.kernel.diag(self.x)
        if self.learn_scale:
            p_obs = self.prior[list(idx)]
            k_oo = k_oo + np.outer(p_obs, p_obs)
            k_xo = k_xo + np.outer(self.prior, p_obs)
            k_xx = k_xx + self.prior ** 2
        chol = np.linalg.cholesky(k_oo + 1e-9 * np.eye(len(idx)))
        alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, y))
        v = np.linalg.solve(chol, k_xo.T)
        return k_xo @ alpha, np.sqrt(np.maximum(k_xx - (v * v).sum(axis=0), 1e-18))


def _ei_order(mean: np.ndarray, sd: np.ndarray, best: float) -> np.ndarray:
    """Candidates by expected improvement below ``best`` (lower is better), ties by mean."""
    u = (best - mean) / sd
    ei = sd * (u * _norm_cdf(u) + np.exp(-0.5 * u * u) / math.sqrt(2 * math.pi))
    return np.lexsort((mean, -np.round(ei, 12)))


class PriorMeanMixture:
    """The walk for a task no training GPU measured: the prior-mean GPs (``PriorMeanGP``)
    of every (prior weight, kernel length) in ``members``, their posteriors mixed with
    equal weights (the mixture's mean and variance), and the next configuration by
    expected improvement under the mixture. Same calls as ``PriorMeanGP``.

    Why a mixture and not one variant chosen per target: the choice was made on five
    training tasks held out in turn, whose scores differ between variants by less than
    they differ between folds, so the chosen variant changed with the model seed and a
    walk paid for the noise of the choice. Mixed, a length that is wrong for this task is
    outvoted where the others agree. On the training tasks alone (leave-one-task-out on
    the H200 spaces, each held-out task's training tasks held out in turn, 6 tasks x 5
    model seeds), the choice scored a mean log E@3% of 1.73 (each inner fold by the
    variant chosen on the other four), the mixture of the same grid 1.69 (lower in 13 of
    30, higher in 17), the mixture with the lengths one doubling up (walk.LENGTHS) 1.63
    (lower in 19, higher in 11)."""

    def __init__(self, order: OrderPrior, candidates: np.ndarray,
                 members: Sequence[tuple[float, float]], learn_scale: bool | None = None):
        if not members:
            raise ValueError("PriorMeanMixture needs at least one (prior weight, length)")
        self.members = [PriorMeanGP(order, candidates, w, length, learn_scale)
                        for w, length in members]
        self.prior = self.members[0].prior
        self.observed: dict[int, float] = {}
        self.weights = np.mean([m.weights for m in self.members], axis=0)

    def observe(self, index: int, log_time: float | None) -> None:
        """As ``PriorMeanGP.observe`` (a failure twice the slowest so far), in every member."""
        for member in self.members:
            member.observe(index, log_time)
        self.observed = self.members[0].observed

    def next(self, exclude: set[int]) -> int:
        return self.ranking(exclude, limit=1)[0]

    def ranking(self, exclude: set[int], limit: int | None = None) -> list[int]:
        """Unmeasured candidates by expected improvement under the mixture (ties by its
        mean); before PRIOR_LEADS measurements, the prior's order."""
        if len(self.observed) < PRIOR_LEADS:
            order = np.argsort(self.prior, kind="stable")
        else:
            parts = [m.posterior() for m in self.members]
            means = np.array([p[0] for p in parts])
            sds = np.array([p[1] for p in parts])
            mean = means.mean(axis=0)
            var = (sds ** 2 + means ** 2).mean(axis=0) - mean ** 2
            order = _ei_order(mean, np.sqrt(np.maximum(var, 1e-18)), parts[0][2])
        out = [int(i) for i in order if int(i) not in exclude]
        return out[:limit] if limit else out
