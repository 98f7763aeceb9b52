"""The analysis' defaults and named choices that the CLI shows in its help before it computes anything.

No numpy and no store here, so that `rtscope --help` stays light (cli/common.py); the modules that use these
names (compare, recommend) import them from here.
"""

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


def per_block_name(metric: str, block: int) -> str:
    """The name of a metric's mean of per-block values (interleaved runs): `mean of STDEV per 20-sample block`;
    the mean of equal blocks is the mean."""
    return f"mean of {STAT_HEAD[metric]} per {block}-sample block" if metric in STAT_HEAD else metric


def per_run_name(metric: str) -> str:
    """The name of a metric's mean of per-run values: `mean of per-run STDEV` (other metrics as they are)."""
    return f"mean of per-run {STAT_HEAD[metric]}" if metric in STAT_HEAD else metric
