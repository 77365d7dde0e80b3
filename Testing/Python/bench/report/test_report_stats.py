"""Every interval and test of the report against scipy (and by hand) on the same data: Clopper-Pearson and Wilson
against ``binomtest(...).proportion_ci``, case-level BCa against ``scipy.stats.bootstrap``, McNemar's exact test
against ``binomtest`` on the discordant pairs, the sign-flip test against a full enumeration."""

from __future__ import annotations

import itertools
import zlib

import numpy as np
import pytest
from scipy import stats

from MedOpenClawLib.bench.report.stats import (
    BCA,
    BOUNDED_RULE,
    CLOPPER_PEARSON,
    RESAMPLES,
    average,
    binomial_interval,
    estimate,
    paired_difference,
    paired_test,
)


def cases(values, repeats: int = 1) -> list[tuple[str, float]]:
    """(case, value) per episode: case k run ``repeats`` times with the same value."""
    return [(f"C{k}", float(value)) for k, value in enumerate(values) for _ in range(repeats)]


def scipy_bca(sample, key: str) -> tuple[float, float]:
    result = stats.bootstrap((np.asarray(sample, dtype=float),), np.mean, method="BCa", n_resamples=RESAMPLES,
                             confidence_level=0.95, random_state=np.random.default_rng(zlib.crc32(key.encode())))
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


@pytest.mark.parametrize("successes,n", [(0, 6), (6, 6), (3, 6), (1, 12), (7, 12), (0, 1), (1, 1), (40, 41)])
def test_binomial_intervals_equal_scipys(successes, n):
    exact = stats.binomtest(successes, n).proportion_ci(confidence_level=0.95, method="exact")
    wilson = stats.binomtest(successes, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert binomial_interval(successes, n) == pytest.approx((exact.low, exact.high), abs=1e-12)
    assert binomial_interval(successes, n, "wilson") == pytest.approx((wilson.low, wilson.high), abs=1e-12)


def test_binary_cells_get_clopper_pearson_and_never_a_point():
    oracle = estimate(cases([1] * 6), "oracle")
    assert (oracle.value, oracle.n, oracle.method) == (1.0, 6, CLOPPER_PEARSON)
    assert oracle.interval == pytest.approx((0.5407418735600995, 1.0))  # the issue's [0.54, 1.00]
    nothing = estimate(cases([0] * 6), "zero")
    assert nothing.interval == pytest.approx((0.0, 1 - 0.5407418735600995)) and nothing.low < nothing.high
    mixed = estimate(cases([1, 0, 1, 1, 0, 1, 0, 0, 1, 1, 1, 0]), "mixed")
    ci = stats.binomtest(7, 12).proportion_ci(method="exact")
    assert mixed.interval == pytest.approx((ci.low, ci.high), abs=1e-12)


def test_fractional_cells_get_scipys_bca_over_cases():
    nsclc = [0.6, 0.4, 0.8, 1.0, 0.2, 0.6, 0.4]  # #correct/5 per case
    cell = estimate(cases(nsclc), "nsclc|task")
    assert cell.method == BCA and cell.value == pytest.approx(np.mean(nsclc))
    assert cell.interval == pytest.approx(scipy_bca(nsclc, "nsclc|task"), abs=1e-12)


def test_repeats_are_averaged_per_case_and_never_narrow_the_interval():
    """The issue's measurement: 6 deterministic cases, --repeats 4, and two runs pooled over the same package."""
    values = [1, 0, 0, 0, 0, 0]
    single = estimate(cases(values), "cell")
    repeated = estimate(cases(values, repeats=4), "cell")
    pooled = estimate(cases(values) + cases(values, repeats=4), "cell")
    assert single.n == repeated.n == pooled.n == 6 and (repeated.episodes, pooled.episodes) == (24, 30)
    assert repeated.interval == single.interval == pooled.interval
    ci = stats.binomtest(1, 6).proportion_ci(method="exact")
    assert single.interval == pytest.approx((ci.low, ci.high), abs=1e-12)
    assert repeated.spread == 0.0  # deterministic repeats: no spread across them
    unsteady = estimate([("C0", 1.0), ("C0", 0.0), ("C1", 1.0), ("C1", 1.0), ("C2", 0.0), ("C2", 0.0)], "u")
    assert unsteady.n == 3 and unsteady.value == pytest.approx(0.5) and unsteady.method == BCA
    assert unsteady.interval == pytest.approx(scipy_bca([0.5, 1.0, 0.0], "u"), abs=1e-12)
    assert unsteady.spread == pytest.approx(np.std([1.0, 0.0], ddof=1) / 3)


def test_every_case_equal_gets_the_documented_rule_not_a_point():
    """Fractional and all equal: the Clopper-Pearson interval of the same mean and n (beta quantiles)."""
    cell = estimate(cases([0.6] * 5), "equal")
    exact = stats.binomtest(3, 5).proportion_ci(method="exact")
    assert cell.method == BOUNDED_RULE and cell.interval == pytest.approx((exact.low, exact.high), abs=1e-12)
    odd = estimate(cases([0.4] * 3), "odd")  # 1.2 of 3: the beta quantiles at a fractional count
    assert odd.interval == pytest.approx((stats.beta.ppf(0.025, 1.2, 2.8), stats.beta.ppf(0.975, 2.2, 1.8)))
    one = estimate(cases([0.4]), "one case")
    assert one.low < 0.4 < one.high
    assert estimate(cases([3, 3, 3]), "calls", bounds=None).interval == (None, None)  # unbounded: no rule


def test_no_finite_sample_gets_a_zero_width_interval():
    rng = np.random.default_rng(5)
    for trial in range(60):
        n = int(rng.integers(1, 9))
        values = rng.choice([0.0, 0.2, 0.5, 1.0], size=n) if trial % 2 else rng.integers(0, 2, size=n)
        cell = estimate(cases(values), f"t{trial}")
        assert cell.low < cell.high and cell.low <= cell.value <= cell.high, (values, cell)


def test_model_average_resamples_each_family_on_its_own():
    parts = [estimate(cases([1, 0, 1, 1]), "a"), estimate(cases([0.2, 0.6, 0.4]), "b"), estimate(cases([0, 1]), "c")]
    mean = average(parts, "avg")
    samples = tuple(np.array(list(part.cases.values())) for part in parts)

    def statistic(*resampled, axis=-1):
        return np.mean([np.mean(sample, axis=axis) for sample in resampled], axis=0)

    expected = stats.bootstrap(samples, statistic, method="BCa", n_resamples=RESAMPLES,
                               random_state=np.random.default_rng(zlib.crc32(b"avg"))).confidence_interval
    assert mean.value == pytest.approx((0.75 + 0.4 + 0.5) / 3) and mean.n == 9
    assert mean.interval == pytest.approx((expected.low, expected.high), abs=1e-12)
    assert average([parts[0], estimate([], "none")], "x").value is None
    perfect = average([estimate(cases([1, 1]), "p"), estimate(cases([1, 1, 1]), "q")], "perfect")
    assert perfect.method == BOUNDED_RULE and perfect.low < 1.0 == perfect.high


def test_paired_difference_is_a_bootstrap_over_matched_cases():
    """The issue's Table 3/6 example: 12 cases, one changed from 0 to 1."""
    before = [0, 1, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0]
    after = list(before)
    after[0] = 1
    new, old = estimate(cases(after), "new"), estimate(cases(before), "old")
    paired = paired_difference(new, old, "delta")
    differences = np.array(after, dtype=float) - np.array(before, dtype=float)
    assert paired.difference.value == pytest.approx(1 / 12) and paired.difference.n == 12
    assert paired.difference.interval == pytest.approx(scipy_bca(differences, "delta"), abs=1e-12)
    assert paired.difference.low >= 0.0  # no case got worse: the paired interval cannot reach below 0
    extra = estimate(cases(after) + [("ONLY-NEW", 1.0)], "new2")
    partial = paired_difference(extra, old, "delta2")
    assert partial.difference.n == 12 and (partial.new_only, partial.reference_only) == (1, 0)
    assert paired_difference(estimate([("X", 1.0)], "x"), old, "none") is None  # no shared case: not differenced
    same = paired_difference(old, old, "same")
    assert same.difference.value == 0.0 and same.difference.low < 0.0 < same.difference.high


def test_mcnemar_exact_is_a_binomial_test_of_the_discordant_pairs():
    first = {f"C{k}": value for k, value in enumerate([1, 1, 1, 1, 1, 0, 0, 1, 0, 1, 1, 0])}
    second = {f"C{k}": value for k, value in enumerate([0, 0, 0, 0, 1, 0, 1, 1, 0, 0, 1, 0])}
    test = paired_test(first, second, "mcnemar")
    gained, lost = 5, 1
    assert test.name == "McNemar exact" and test.detail.startswith("5 gained, 1 lost")
    assert test.p_value == pytest.approx(stats.binomtest(gained, gained + lost, 0.5).pvalue, abs=1e-12)
    by_hand = 2 * sum(stats.binom.pmf(k, gained + lost, 0.5) for k in range(min(gained, lost) + 1))
    assert test.p_value == pytest.approx(min(by_hand, 1.0), abs=1e-12)
    assert paired_test(first, first, "same").p_value == 1.0


def test_sign_flip_test_equals_a_full_enumeration():
    first = {"a": 0.8, "b": 0.6, "c": 0.4, "d": 1.0, "e": 0.2, "f": 0.6}
    second = {"a": 0.4, "b": 0.6, "c": 0.2, "d": 0.6, "e": 0.4, "f": 0.2}
    test = paired_test(first, second, "flip")
    differences = np.array([first[key] - second[key] for key in first])
    nonzero = differences[differences != 0]
    observed = abs(nonzero.mean())
    flips = [abs(np.mean(nonzero * np.array(signs))) for signs in itertools.product((1, -1), repeat=len(nonzero))]
    by_hand = np.mean([value >= observed - 1e-12 for value in flips])
    assert test.name == "sign-flip permutation" and test.p_value == pytest.approx(by_hand, abs=1e-12)
