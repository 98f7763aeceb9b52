"""Paired verdicts (analysis/paired.py) on data of known truth: A/A false-positive rate (also under repeated
looks), power where pairing is needed, interval coverage; and the interleaved design's layout (experiment/design.py).

The simulations draw interleaved runs the way this VM drifts: a run-level speed factor and a slow drift within
the run (shared by the arms measured seconds apart), plus per-call noise with occasional stalls."""

from __future__ import annotations

import numpy as np
import pytest

from rtscope.analysis.paired import Estimate, look_level, paired, welch_estimate, window_samples
from rtscope.errors import UsageError
from rtscope.experiment import design
from rtscope.experiment.execute import plan
from rtscope.experiment.sequential import LOOK_ROUNDS, look_of
from rtscope.experiment.spec.parse import analyse
from spec_texts import beam_beside_native

pytestmark = pytest.mark.fast

ALPHA = 0.05
SMALL_EFFECT = 0.2   # a change 32 rounds of 4 blocks see only near their end (the simulated stalls rule the mean)


def interleaved_run(rng, effect: float, blocks: int = 10, block: int = 20, mean: float = 60_000.0,
                    between: float = 0.2, drift: float = 0.1, within: float = 0.3, stall: float = 0.01):
    """One interleaved run of two arms (baseline, cell): per block the machine's speed (a run factor and a random
    walk), per sample noise and rare 4 ms stalls; the cell is `effect` slower. Returns (cell, baseline) samples."""
    speed = (1 + rng.normal(0, between)) * np.exp(np.cumsum(rng.normal(0, drift, blocks)))
    out = []
    for factor in (1 + effect, 1.0):
        x = mean * factor * np.repeat(speed, block) * (1 + rng.normal(0, within, blocks * block)).clip(0.2)
        x += (rng.random(blocks * block) < stall) * 4e6
        out.append(x)
    return out[0], out[1]


def called(runs, metric="mean", alpha=ALPHA, block=20) -> bool:
    res = paired(runs, block, metric)
    return res.estimate.p() <= alpha


def test_aa_false_positive_rate_at_most_alpha():
    rng = np.random.default_rng(1)
    for metric in ("mean", "median", "max"):
        hits = sum(called([interleaved_run(rng, 0.0) for _ in range(3)], metric) for _ in range(600))
        assert hits / 600 <= ALPHA + 0.02, (metric, hits / 600)   # 0.07: alpha plus ~2.5 binomial SEs


def test_aa_with_one_run_and_serially_correlated_blocks():
    """One run: its blocks are the replicates; a drift left in the differences (the arms measured a little apart)
    is serially correlated, and the inflation by r1 keeps the rate at α."""
    rng = np.random.default_rng(2)
    hits = 0
    for _ in range(600):
        n = 30
        common = np.cumsum(rng.normal(0, 0.05, n))                      # a random walk the arms share...
        lag = np.zeros(n)                                               # ...and an AR(1) wander they do not
        for t in range(1, n):
            lag[t] = 0.6 * lag[t - 1] + rng.normal(0, 0.03)
        a = 60_000 * np.exp(np.repeat(common + lag, 20)) * (1 + rng.normal(0, 0.3, n * 20))
        b = 60_000 * np.exp(np.repeat(common, 20)) * (1 + rng.normal(0, 0.3, n * 20))
        hits += called([(a, b)])
    assert hits / 600 <= ALPHA + 0.02, hits / 600


def test_a_paired_ab_that_runs_alone_cannot_see():
    """A 3 % effect under this machine's between-run spread: interleaved (5 runs × 2 arms × 200 calls) calls it
    in most trials; the same calls as 5 vs 5 runs of their own (Welch on per-run means) almost never do."""
    rng = np.random.default_rng(3)
    paired_hits = welch_hits = 0
    trials = 200
    for _ in range(trials):
        runs = [interleaved_run(rng, 0.03, blocks=10, block=20, within=0.15, stall=0.0) for _ in range(5)]
        paired_hits += called(runs)
        alone = [interleaved_run(rng, 0.03, blocks=10, block=20, within=0.15, stall=0.0) for _ in range(10)]
        cell = np.array([a.mean() for a, _ in alone[:5]])
        base = np.array([b.mean() for _, b in alone[5:]])
        welch_hits += welch_estimate(cell, base).p() <= ALPHA
    assert paired_hits / trials >= 0.8, paired_hits / trials
    assert welch_hits / trials <= 0.2, welch_hits / trials
    res = paired(runs, 20, "mean")
    assert res.removed > 0.9 and "pairing removed" in res.describe()


def test_interval_coverage_on_known_differences():
    rng = np.random.default_rng(4)
    covered, trials = 0, 600
    for _ in range(trials):
        runs = [interleaved_run(rng, 0.05, stall=0.0) for _ in range(3)]
        res = paired(runs, 20, "mean")
        lo, hi = res.estimate.interval(0.05)
        covered += lo <= np.log(1.05) <= hi   # the cell is 5 % slower: the log ratio's truth
    assert 0.93 <= covered / trials <= 0.99, covered / trials


BUDGET_ROUNDS = 32   # a simulated budget: 32 rounds of equal length, the last look at its end


def spending_levels() -> dict[int, float]:
    """The level of each look of a sequence whose budget ends after BUDGET_ROUNDS rounds: looks after the rounds
    of LOOK_ROUNDS at time t = rounds / 32 of the budget, the one at its end at all that is left."""
    levels, spent = {}, 0.0
    for rounds in range(1, BUDGET_ROUNDS + 1):
        if look_of(rounds) is not None or rounds == BUDGET_ROUNDS:
            levels[rounds], by_time = look_level(ALPHA, len(levels) + 1, rounds / BUDGET_ROUNDS, spent)
            spent += by_time
    return levels


def sequence_calls(rng, effect: float, levels: dict[int, float]) -> bool:
    """Rounds of one interleaved run each, judged after the rounds `levels` names at its level: whether any look
    called a difference."""
    runs = []
    for rounds in range(1, BUDGET_ROUNDS + 1):
        runs.append(interleaved_run(rng, effect, blocks=4))
        if rounds in levels and paired(runs, 20, "mean").estimate.p() <= levels[rounds]:
            return True
    return False


def test_repeated_looks_keep_the_false_positive_rate():
    """An A/A looked at after rounds 2, 3, 4, 6, ... 32 at the spent levels keeps the rate at α; at α each (no
    spending) it does not: the check can fail."""
    spending = spending_levels()
    naive = dict.fromkeys(spending, ALPHA)
    rng = np.random.default_rng(5)
    trials = 300
    spent_rate = sum(sequence_calls(rng, 0.0, spending) for _ in range(trials)) / trials
    naive_rate = sum(sequence_calls(rng, 0.0, naive) for _ in range(trials)) / trials
    assert spent_rate <= ALPHA + 0.02, spent_rate
    assert naive_rate > ALPHA and naive_rate > 2 * spent_rate, (naive_rate, spent_rate)


def test_spending_by_time_decides_small_effects_a_union_over_looks_misses():
    """The same data judged with half of α spent by look and half by the budget's time (the rest at its end),
    and with α/(k(k+1)) at look k (a union bound over any number of looks): the first calls a change that only
    the last looks can see more often."""
    spending = spending_levels()
    by_look = {rounds: ALPHA / (k * (k + 1)) for k, rounds in enumerate(spending, 1)}
    rng = np.random.default_rng(6)
    trials = 100
    by_time = by_count = 0
    for _ in range(trials):
        state = rng.bit_generator.state
        by_time += sequence_calls(rng, SMALL_EFFECT, spending)
        rng.bit_generator.state = state                      # the same runs, judged the other way
        by_count += sequence_calls(rng, SMALL_EFFECT, by_look)
    assert by_time > 1.5 * by_count, (by_time, by_count)
    print(f"change {SMALL_EFFECT:.0%}: called in {by_time}/{trials} (half of α spent by time) vs "
          f"{by_count}/{trials} (α/(k(k+1)))")


def test_look_levels_sum_to_alpha():
    spending = spending_levels()
    by_look_half = ALPHA / 2 * (1 - 1 / (len(spending) + 1))    # α/2 · Σ 1/(k(k+1)) over the looks made
    assert sum(spending.values()) == pytest.approx(ALPHA / 2 + by_look_half) and sum(spending.values()) < ALPHA
    assert spending[BUDGET_ROUNDS] > 0.1 * ALPHA                         # the time half's rest, at the end
    assert spending[2] == pytest.approx(ALPHA / 4, rel=0.01)             # a clear effect stops at look 1
    assert look_level(ALPHA, 3, 0.5, ALPHA / 8) == (ALPHA / 24, 0.0)     # no later: nothing more by time
    assert look_of(2) == 1 and look_of(5) is None and LOOK_ROUNDS[:4] == (2, 3, 4, 6)
    for bad in ((0, 0.5), (1, 1.5)):
        with pytest.raises(ValueError):
            look_level(ALPHA, *bad, 0.0)


def test_estimate_agrees_with_scipy_and_welch():
    from scipy import stats as st
    rng = np.random.default_rng(6)
    a, b = rng.normal(10, 2, 8), rng.normal(11, 3, 6)
    w = welch_estimate(a, b)
    assert w.p() == pytest.approx(st.ttest_ind(a, b, equal_var=False).pvalue, rel=1e-9)
    e = Estimate(1.0, 0.5, 10)
    lo, hi = e.interval(0.05)
    assert e.p(lo) == pytest.approx(0.05) and e.p(hi) == pytest.approx(0.05)
    assert e.above(0.0) == pytest.approx(st.t.sf(2.0, 10))


def test_one_block_pair_a_run_takes_the_runs_as_replicates():
    """block = iterations: each run gives one pair; the runs' differences are then the replicates (an A/A must not
    get a standard error of 0)."""
    rng = np.random.default_rng(8)
    hits = 0
    for _ in range(300):
        res = paired([interleaved_run(rng, 0.0, blocks=1, block=100) for _ in range(5)], 100, "mean")
        assert res.estimate.se > 0 and res.cluster and res.estimate.df == 4
        hits += res.estimate.p() <= ALPHA
    assert hits / 300 <= ALPHA + 0.03, hits / 300
    assert paired([interleaved_run(rng, 0.0, blocks=1, block=100)], 100, "mean") is None    # one pair: nothing


def test_blocks_of_one_sample_have_no_stdev():
    rng = np.random.default_rng(7)
    assert paired([interleaved_run(rng, 0.0, blocks=10, block=1)], 1, "stdev") is None
    assert paired([interleaved_run(rng, 0.0, blocks=10, block=1)], 1, "mean") is not None


def spec(tmp_path, design_="auto", iterations=200, extra=""):
    text = beam_beside_native(f'design = "{design_}"\n{extra}', '["sum", "fib"]', iterations, native_iterations=100)
    return analyse(text, "paired.toml")


def test_auto_interleaves_what_one_process_can_and_says_why_not(tmp_path):
    lay = design.layout(spec(tmp_path))
    [group] = lay.groups
    assert len(group.cells) == 4 and group.block == 5           # 200 iterations: 40 blocks of 5
    assert [c.key for c in lay.alone] == ["exec/sum/native iterations=100"]
    assert any("no other configuration of its block can share its process" in n for n in lay.notes())
    planned = plan(spec(tmp_path), seed=1)
    arms = [p for p in planned if p.pair is not None]
    assert len(arms) == 4 and len({p.pair for p in arms}) == 1
    assert [p.index for p in arms] == list(range(arms[0].index, arms[0].index + 4))   # consecutive
    assert {p.block_samples for p in arms} == {5}


def test_design_runs_is_todays_plan(tmp_path):
    planned = plan(spec(tmp_path, "runs"), seed=1)
    assert all(p.pair is None for p in planned) and len(planned) == 5


def test_interleaved_refuses_what_cannot_be_an_arm(tmp_path):
    with pytest.raises(UsageError, match="cannot be an arm of an interleaved run.*design = \"auto\""):
        design.layout(spec(tmp_path, "interleaved"))
    with pytest.raises(UsageError, match="block = 30 does not divide the arms' 200 iterations"):
        design.layout(spec(tmp_path, "auto", extra="block = 30"))


def test_unknown_design_names_the_valid_ones(tmp_path):
    s = spec(tmp_path, "duets")
    assert any("unknown design 'duets'; valid: runs, interleaved, duet, auto" in p.message for p in s.problems)


def alternating_run(rng, effect: float, block: int, samples: int = 1000, phase: int = 60, shift: float = 0.15):
    """One interleaved run of two arms alternating every `block` samples (each round a random order) on a machine
    whose speed jumps every ~`phase` calls in time (a phase of the host: both arms see it while it lasts)."""
    calls = 2 * samples
    jumps = np.cumsum(rng.random(calls) < 1.0 / phase)
    speed = np.exp(rng.normal(0, shift, jumps[-1] + 1))[jumps]
    arm_of = np.concatenate([np.repeat(rng.permutation(2), block) for _ in range(samples // block)])
    x = 60_000 * speed * (1 + rng.normal(0, 0.1, calls)).clip(0.2)
    return x[arm_of == 0] * (1 + effect), x[arm_of == 1]


def test_short_blocks_long_windows():
    """The arms alternate every few samples and the statistics are taken over windows of many blocks: a phase of
    the machine lasting tens of calls falls on both arms, which blocks of 100 do not manage. A/A stays at α."""
    assert window_samples(1000, 5) == 100 and window_samples(2000, 5) == 200 and window_samples(200, 20) == 20
    assert window_samples(10_000, 200) == 200 and window_samples(6, 3) == 3 and window_samples(1000, 300) == 300
    rng = np.random.default_rng(7)
    se = {b: np.median([paired([alternating_run(rng, 0.0, b) for _ in range(3)], b, "mean").estimate.se
                        for _ in range(40)]) for b in (5, 100)}
    assert se[5] < 0.5 * se[100], se
    hits = sum(paired([alternating_run(rng, 0.0, 5) for _ in range(3)], 5, "mean").estimate.p() <= ALPHA
               for _ in range(400))
    assert hits / 400 <= ALPHA + 0.025, hits / 400
    power = sum(paired([alternating_run(rng, 0.03, 5) for _ in range(3)], 5, "mean").estimate.p() <= ALPHA
                for _ in range(100))
    assert power >= 80, power


def test_default_block_and_order(tmp_path):
    assert design.default_block(200) == 5 and design.default_block(5) == 1
    assert design.default_block(10_000) == 5 and design.default_block(97) == 1 and design.default_block(40) == 4
    assert design.default_block(100_000, 9) == 50       # 18,000 blocks: within MAX_ORDER
    with pytest.raises(UsageError, match="block = 1 gives 4 arms 80,000 blocks, more than one run takes .20,000.; choose a divisor of 20000 of at least 4"):
        design.layout(spec(tmp_path, "auto", iterations=20_000, extra="block = 1"))
    order = design.block_order(3, 4, "seed")
    assert len(order) == 12 and all(sorted(order[i:i + 3]) == [0, 1, 2] for i in range(0, 12, 3))
    assert order == design.block_order(3, 4, "seed") != design.block_order(3, 4, "other")
