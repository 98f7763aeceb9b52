"""False-positive rate and power of claim verdicts (analysis/claims.py), by simulation with the run as the unit.

Each trial makes two configurations of `runs` runs × `samples` samples: a run's mean is the configuration's
plus a run effect (SD `between` of the mean), its samples normal around it (SD `within`). Three claims are
judged together, as one `rtscope reproduce` judges a spec's claims (one Holm family): cell `lower` than
baseline, cell `higher`, and `same` within ±`margin`.

- A/A (equal truth): how often a difference claim `holds` (must be at most α) and how often the sameness claim
  is `contradicted` (at most α);
- power: with the cell 10 % lower, how often `lower` holds; with equal truth, how often `same` holds;
- coverage: with the cell 20 % lower, how often the 95 % interval of a ratio claim holds the true ratio 0.8,
  and that of a bound claim the cell's true mean;
- runs needed: with the cell 5 % lower and 3 runs a side, the runs per configuration `undecided` asks for,
  then how often `lower` holds with that many runs (the 80 % it promises).

usage: bench/claims_aa.py [--trials N] [--runs R] [--seed S]     (docs/analysis.md has the figures)
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from rtscope.analysis.claims import Claim, Expect, judge
from rtscope.analysis.compare import cells_from_samples

SIDES = {"baseline": (("label", "a"),), "cell": (("label", "b"),)}
CLAIMS = [Claim(kind, "", "mean", Expect(kind, margin=0.05 if kind == "same" else None), **SIDES)
          for kind in ("lower", "higher", "same")]
INTERVALS = [Claim("ratio", "", "mean", Expect("ratio", low=0.5, high=1.5), **SIDES),
             Claim("below", "", "mean", Expect("below", bound=1000.0, unit="ns"), **SIDES)]


def cells(rng: np.random.Generator, effect: float, runs: int, samples: int, between: float, within: float):
    groups = {}
    for name, mean in (("a", 100.0), ("b", 100.0 * (1.0 + effect))):
        groups[name] = [rng.normal(mean * (1.0 + rng.normal(0.0, between)), within * mean, samples)
                        for _ in range(runs)]
    return cells_from_samples(groups)


def trial(rng: np.random.Generator, effect: float, runs: int, samples: int, between: float, within: float,
          alpha: float) -> dict[str, str]:
    return {j.claim.id: j.verdict for j in judge(CLAIMS, cells(rng, effect, runs, samples, between, within),
                                                   alpha=alpha)}


def coverage(trials: int, runs: int = 5, samples: int = 200, between: float = 0.05, within: float = 0.1,
             seed: int = 2) -> dict[str, float]:
    """How often the 95 % intervals of a ratio and a bound claim hold the truth (cell 20 % below baseline)."""
    rng = np.random.default_rng(seed)
    held = {"ratio": 0, "below": 0}
    for _ in range(trials):
        ratio, below = judge(INTERVALS, cells(rng, -0.2, runs, samples, between, within))
        held["ratio"] += ratio.interval[0] <= 0.8 <= ratio.interval[1]
        held["below"] += below.interval[0] <= 80.0 <= below.interval[1]
    return {k: v / trials for k, v in held.items()}


def runs_needed_kept(trials: int, samples: int = 200, between: float = 0.05, within: float = 0.1,
                     seed: int = 3) -> tuple[int, float]:
    """The runs `undecided` asks for (median over trials of 3 runs a side, the cell 5 % lower), and how often
    `lower` holds with that many runs a side."""
    rng = np.random.default_rng(seed)
    asked = [j.runs_needed for _ in range(trials)
             for j in judge(CLAIMS, cells(rng, -0.05, 3, samples, between, within))
             if j.claim.id == "lower" and j.verdict == "undecided" and j.runs_needed]
    needed = int(np.median(asked))
    holds = sum(trial(rng, -0.05, needed, samples, between, within, 0.05)["lower"] == "holds"
                for _ in range(trials))
    return needed, holds / trials


def simulate(trials: int, runs: int = 5, samples: int = 200, between: float = 0.05, within: float = 0.1,
             alpha: float = 0.05, seed: int = 1) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    aa = [trial(rng, 0.0, runs, samples, between, within, alpha) for _ in range(trials)]
    ab = [trial(rng, -0.10, runs, samples, between, within, alpha) for _ in range(trials)]

    def rate(results, cid, verdict):
        return sum(r[cid] == verdict for r in results) / len(results)

    return {"aa_lower_holds": rate(aa, "lower", "holds"), "aa_higher_holds": rate(aa, "higher", "holds"),
            "aa_same_contradicted": rate(aa, "same", "contradicted"), "aa_same_holds": rate(aa, "same", "holds"),
            "power_lower_holds": rate(ab, "lower", "holds"), "ab_higher_holds": rate(ab, "higher", "holds")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    for runs in sorted({3, args.runs, 10}):
        r = simulate(args.trials, runs, seed=args.seed)
        half = 1.96 * (0.05 * 0.95 / args.trials) ** 0.5
        print(f"{runs} runs × 200 samples a configuration, between-run SD 5 %, within-run SD 10 %, α = 0.05, "
              f"{args.trials} trials (±{half:.3f} at α):")
        print(f"  A/A: lower holds {r['aa_lower_holds']:.3f}, higher holds {r['aa_higher_holds']:.3f}, "
              f"same (±5 %) contradicted {r['aa_same_contradicted']:.3f}, same holds {r['aa_same_holds']:.3f}")
        print(f"  cell 10 % lower: lower holds {r['power_lower_holds']:.3f}, higher holds {r['ab_higher_holds']:.3f}")
    c = coverage(args.trials, args.runs, seed=args.seed + 1)
    print(f"{args.runs} runs, cell 20 % lower: the 95 % interval holds the truth: ratio {c['ratio']:.3f}, "
          f"bound (the cell's mean) {c['below']:.3f}")
    needed, kept = runs_needed_kept(max(200, args.trials // 4), seed=args.seed + 2)
    print(f"cell 5 % lower, 3 runs a side: undecided asks for {needed} runs a side; with them lower holds "
          f"{kept:.3f} (80 % promised; lower, higher and same judged together both times)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
