"""Every number in a report, over cases: means, 95 % intervals, paired differences and exact paired tests.

The case is the unit of evidence. Episodes of one case (``--repeats``, or several runs over the same package) are
reduced to the case's mean first; their spread is the case's stability, reported apart, never as extra cases.

Intervals (the table notes name them, and each cell records which one it has):

- every case 0 or 1 (binary per-case metrics: Task, Strict, Loc of one episode per case): Clopper-Pearson, exact;
- otherwise (#correct of N questions, repeat means, shares): a case-level bootstrap, BCa (``scipy.stats.bootstrap``);
- the documented rule where a bootstrap has nothing to resample (every case equal, or one case): a metric bounded in
  [lo, hi] gets the Clopper-Pearson interval of its mean rescaled to [0, 1] at the same n -- the widest interval a
  bounded metric can need, since at a given mean a two-point variable has the largest variance. An unbounded
  metric (tool calls) then has no interval. A finite sample never gets a zero-width interval.

Differences between two cells scored on the same cases are paired: the per-case differences over the matched cases,
bootstrapped (BCa) the same way (the rule on [-1, 1]). Resampling is seeded from the cell's name, so a report is
reproducible byte for byte.
"""

from __future__ import annotations

import warnings
import zlib
from dataclasses import dataclass, field

import numpy as np
from scipy import special  # scipy.stats (1.1 s of CPU to import) only where a bootstrap or an exact test runs

LEVEL = 0.95
RESAMPLES = 9999
EXACT_FLIPS = 16  # sign-flip tests enumerate every flip up to 2**16 arrangements, else sample them
CLOPPER_PEARSON, BCA, BOUNDED_RULE = "clopper-pearson", "bca", "clopper-pearson (every case equal)"
INTERVAL_NOTE = ("Intervals: 95 %, over cases (repeats are averaged per case first): Clopper-Pearson (exact) where "
                 "every case scores 0 or 1, else a case-level BCa bootstrap; where every case is equal, the "
                 "Clopper-Pearson interval of the same mean and n.")


@dataclass(frozen=True, eq=False)
class Estimate:
    """A mean over cases with its interval. ``cases``: case -> the case's mean (what paired comparisons match on);
    ``episodes``: how many episodes went into them; ``spread``: the mean within-case standard deviation over cases
    run more than once (stability), None when no case was repeated."""

    value: float | None
    n: int
    low: float | None = None
    high: float | None = None
    method: str | None = None
    cases: dict[str, float] = field(default_factory=dict)
    episodes: int = 0
    spread: float | None = None

    @property
    def interval(self) -> tuple[float | None, float | None]:
        return self.low, self.high


MISSING = Estimate(None, 0)


def _rng(key: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(key.encode("utf-8")))


def binomial_interval(successes: float, n: int, method: str = CLOPPER_PEARSON) -> tuple[float, float]:
    """Clopper-Pearson (``clopper-pearson``) or Wilson score (``wilson``) interval of ``successes`` of ``n``. A
    fractional count (the bounded-metric rule) uses the same beta quantiles, continuous in the count."""
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"no binomial interval for {successes} of {n}")
    alpha = 1.0 - LEVEL
    if method == "wilson":
        z = special.ndtri(1.0 - alpha / 2.0)  # the normal quantile, as stats.norm.ppf computes it
        p = successes / n
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
        return float(max(centre - half, 0.0)), float(min(centre + half, 1.0))
    # the beta quantiles (stats.beta.ppf computes them with the same Boost routine, to the last bit)
    low = 0.0 if successes == 0 else special.betaincinv(successes, n - successes + 1, alpha / 2.0)
    high = 1.0 if successes == n else special.betaincinv(successes + 1, n - successes, 1.0 - alpha / 2.0)
    return float(low), float(high)


def bounded_rule(mean: float, n: int, bounds: tuple[float, float]) -> tuple[float, float]:
    """The interval of a mean of ``n`` cases bounded in ``bounds`` when the cases show no spread (module note)."""
    lo, hi = bounds
    share = min(max((mean - lo) / (hi - lo), 0.0), 1.0)
    low, high = binomial_interval(share * n, n)
    return lo + low * (hi - lo), lo + high * (hi - lo)


def _bca(samples: tuple[np.ndarray, ...], statistic, key: str) -> tuple[float, float] | None:
    """scipy's BCa interval, or None where it is undefined (no spread, a sample of one case)."""
    if any(len(sample) < 2 for sample in samples) or all(np.ptp(sample) == 0 for sample in samples):
        return None
    from scipy import stats

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # DegenerateDataWarning / division warnings: answered by the rule
        result = stats.bootstrap(samples, statistic, method="BCa", n_resamples=RESAMPLES, confidence_level=LEVEL,
                                 random_state=_rng(key), vectorized=True)
    low, high = result.confidence_interval
    if not (np.isfinite(low) and np.isfinite(high)) or high <= low:
        return None
    return float(low), float(high)


def _mean(sample, axis=-1):
    return np.mean(sample, axis=axis)


def interval_of(means: np.ndarray, key: str, bounds: tuple[float, float] | None = (0.0, 1.0)) -> tuple:
    """(low, high, method) of the mean of per-case ``means`` (module note)."""
    n, mean = len(means), float(np.mean(means))
    if bounds == (0.0, 1.0) and np.all((means == 0) | (means == 1)):
        return (*binomial_interval(int(means.sum()), n), CLOPPER_PEARSON)
    found = _bca((means,), _mean, key)
    if found is not None:
        return (*found, BCA)
    if bounds is not None:
        return (*bounded_rule(mean, n, bounds), BOUNDED_RULE)
    return None, None, None


def reduce_cases(values: list[tuple[str, float]]) -> tuple[dict[str, float], float | None]:
    """(case -> mean over its episodes, mean within-case standard deviation over repeated cases)."""
    by_case: dict[str, list[float]] = {}
    for case, value in values:
        by_case.setdefault(case, []).append(float(value))
    spreads = [float(np.std(group, ddof=1)) for group in by_case.values() if len(group) > 1]
    return {case: float(np.mean(group)) for case, group in by_case.items()}, (
        float(np.mean(spreads)) if spreads else None)


def estimate(values: list[tuple[str, float]], key: str, bounds: tuple[float, float] | None = (0.0, 1.0)) -> Estimate:
    """The case-level mean and interval of ``(case, value)`` pairs, one per episode. ``bounds``: the metric's range
    (None: unbounded, e.g. tool calls)."""
    if not values:
        return MISSING
    cases, spread = reduce_cases(values)
    means = np.fromiter(cases.values(), dtype=float)
    if bounds is not None and (means.min() < bounds[0] or means.max() > bounds[1]):
        bounds = None
    low, high, method = interval_of(means, key, bounds)
    return Estimate(float(means.mean()), len(means), low, high, method, cases, len(values), spread)


def average(parts: list[Estimate], key: str) -> Estimate:
    """Unweighted average of estimates over disjoint case sets (MedFlow-Bench's Model Avg. over task families):
    each part's cases resampled on their own (a multi-sample BCa); missing when any part is missing."""
    if not parts or any(part.value is None for part in parts):
        return MISSING
    samples = tuple(np.fromiter(part.cases.values(), dtype=float) for part in parts)
    value = float(np.mean([sample.mean() for sample in samples]))
    n = sum(len(sample) for sample in samples)

    def statistic(*resampled, axis=-1):
        return np.mean([np.mean(sample, axis=axis) for sample in resampled], axis=0)

    found = _bca(samples, statistic, key)
    low, high, method = (*found, BCA) if found is not None else (None, None, None)
    if found is None and all(sample.min() >= 0 and sample.max() <= 1 for sample in samples) and \
            all(np.ptp(sample) == 0 for sample in samples):
        low, high, method = (*bounded_rule(value, n, (0.0, 1.0)), BOUNDED_RULE)
    return Estimate(value, n, low, high, method, {}, sum(part.episodes for part in parts))


@dataclass(frozen=True)
class Paired:
    """``new - reference`` over the cases both were scored on."""

    difference: Estimate  # n: the matched cases
    new_only: int  # cases only the new cell has
    reference_only: int


def matched(new: dict[str, float], reference: dict[str, float]) -> tuple[list[str], np.ndarray, np.ndarray]:
    cases = [case for case in new if case in reference]
    return cases, np.array([new[case] for case in cases]), np.array([reference[case] for case in cases])


def paired_difference(new: Estimate, reference: Estimate, key: str) -> Paired | None:
    """The paired difference of two cells on their matched cases (None when they share no case: not differenced)."""
    cases, first, second = matched(new.cases, reference.cases)
    if not cases:
        return None
    differences = first - second
    bounded = min(first.min(), second.min()) >= 0 and max(first.max(), second.max()) <= 1
    low, high, method = interval_of(differences, key, (-1.0, 1.0) if bounded else None)
    difference = Estimate(float(differences.mean()), len(cases), low, high, method,
                          dict(zip(cases, differences.tolist())))
    return Paired(difference, len(new.cases) - len(cases), len(reference.cases) - len(cases))


@dataclass(frozen=True)
class PairedTest:
    name: str  # "McNemar exact" | "sign-flip permutation"
    p_value: float
    detail: str  # what the test counted


def paired_test(new: dict[str, float], reference: dict[str, float], key: str) -> PairedTest | None:
    """An exact paired test of ``new`` against ``reference`` on their matched cases: McNemar's exact test (a
    binomial test of the discordant pairs) when every matched value is 0 or 1, else a sign-flip permutation test
    of the mean difference (every flip enumerated up to 2**16 arrangements)."""
    from scipy import stats

    cases, first, second = matched(new, reference)
    if not cases:
        return None
    if np.all(np.isin(first, (0, 1))) and np.all(np.isin(second, (0, 1))):
        gained = int(np.sum((first == 1) & (second == 0)))
        lost = int(np.sum((first == 0) & (second == 1)))
        p = 1.0 if gained + lost == 0 else float(stats.binomtest(gained, gained + lost, 0.5).pvalue)
        return PairedTest("McNemar exact", p, f"{gained} gained, {lost} lost of {len(cases)}")
    differences = first - second
    nonzero = differences[differences != 0]
    if len(nonzero) == 0:
        return PairedTest("sign-flip permutation", 1.0, f"no case changed of {len(cases)}")
    exact = len(nonzero) <= EXACT_FLIPS
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = stats.permutation_test((nonzero,), _mean, permutation_type="samples", vectorized=True,
                                        n_resamples=2 ** len(nonzero) if exact else RESAMPLES,
                                        alternative="two-sided", random_state=_rng(key))
    return PairedTest("sign-flip permutation", float(min(result.pvalue, 1.0)),
                      f"{len(nonzero)} of {len(cases)} cases changed" + ("" if exact else f", {RESAMPLES} flips"))

