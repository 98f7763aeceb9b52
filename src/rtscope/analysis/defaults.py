"""The analysis' defaults and named choices that the CLI shows in its help before it computes anything.

No numpy and no store here, so that `rtscope --help` stays light (cli/common.py); the modules that use these
names (compare, recommend) import them from here.
"""

from ..words import counted

# The advice on repetitions, said in one place: compare's warning and untested rows, reproduce's claims.
MIN_REPETITIONS = 3   # fewer: the between-run variance rests on one or two differences, and a warning says so
REPEAT_ADVICE = f"repeat each configuration {MIN_REPETITIONS} times or more (`rtscope plan` says how many)"


def few_runs_reason(mine: int, base: int | None, what: str = "", also: str = "") -> str:
    """Why a test was not made: a side with a single run (mine vs base runs; base None: one side only). `what`
    follows the counts (" with a p99"), `also` the consequence (", and the runs needed cannot be computed")."""
    counts = counted(mine, "run") if base is None else f"{counted(mine, 'run')} vs {counted(base, 'run')}"
    sides = "the side has" if base is None else "each side has" if mine < 2 and base < 2 else "one side has"
    return (f"{counts}{what}: {sides} a single run, so the between-run variation is unknown and nothing is "
            f"tested{also}; {REPEAT_ADVICE}")


ALPHA = 0.05          # significance level after Holm's correction
GOALS = ("max", "p99", "stdev", "mean", "median")  # what `recommend` can minimise
METRICS = ("mean", "median", "p99", "max", "stdev")  # what `compare` tests, each minimised
TAIL = "tail"         # compare's tail row: the latency exceeded with p = 1e-9 per sample (analysis/tail_bound.py)
ROWS = (*METRICS, TAIL)  # every row compare can test, and what --fail-on worse:METRIC may name
STAT_KEY = {"mean": "mean", "median": "p50", "p99": "p99", "max": "max", "stdev": "stdev"}  # its statistics key


# Two quantities share a statistic's name: one of the samples of a configuration's runs pooled (the study tables,
# `show`, the statistics tables: "STDEV") and the mean of each run's own value (what compare, recommend and the
# claims test, the run being the unit). They differ (a pooled STDEV holds the spread between runs too), so the
# second has a name of its own wherever a table shows it.
POOLED = "the samples of a configuration's runs pooled"   # what a pooled table says it shows
STAT_HEAD = {"mean": "AVG", "median": "p50", "p99": "p99", "max": "MAX", "stdev": "STDEV"}


def per_window_name(metric: str, window: int) -> str:
    """The name of a metric's mean of per-window values (interleaved runs): `mean of STDEV per 200-sample
    window`; the mean of equal windows is the mean: `AVG`."""
    if metric == "mean":
        return STAT_HEAD[metric]
    return f"mean of {STAT_HEAD[metric]} per {window}-sample window" if metric in STAT_HEAD else metric


def per_run_name(metric: str) -> str:
    """The name of a metric's mean of per-run values: `mean of per-run STDEV` (other metrics as they are)."""
    return f"mean of per-run {STAT_HEAD[metric]}" if metric in STAT_HEAD else metric
