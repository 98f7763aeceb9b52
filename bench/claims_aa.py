"""False-positive rate and power of claim verdicts (analysis/claims.py), by simulation with the run as the unit.

Each trial makes two configurations of `runs` runs × `samples` samples: a run's mean is the configuration's
plus a run effect (SD `between` of the mean), its samples normal around it (SD `within`). Three claims are
judged together, as one `rtscope reproduce` judges a spec's claims (one Holm family): cell `lower` than
baseline, cell `higher`, and `same` within ±`margin`.

- A/A (equal truth): how often a difference claim `holds` (must be at most α) and how often the sameness claim
  is `contradicted` (at most α);
- power: with the cell 10 % lower, how often `lower` holds; with equal truth, how often `same` holds.

usage: bench/claims_aa.py [--trials N] [--runs R] [--seed S]     (docs/analysis.md has the figures)
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from rtscope.analysis.claims import Claim, Expect, judge
from rtscope.analysis.compare import cells_from_samples

CLAIMS = [Claim(kind, "", "mean", Expect(kind, margin=0.05 if kind == "same" else None),
                baseline=(("label", "a"),), cell=(("label", "b"),)) for kind in ("lower", "higher", "same")]


def trial(rng: np.random.Generator, effect: float, runs: int, samples: int, between: float, within: float,
          alpha: float) -> dict[str, str]:
    groups = {}
    for name, mean in (("a", 100.0), ("b", 100.0 * (1.0 + effect))):
        groups[name] = [rng.normal(mean * (1.0 + rng.normal(0.0, between)), within * mean, samples)
                        for _ in range(runs)]
    return {j.claim.id: j.verdict for j in judge(CLAIMS, cells_from_samples(groups), alpha=alpha)}


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
    return 0


if __name__ == "__main__":
    sys.exit(main())
