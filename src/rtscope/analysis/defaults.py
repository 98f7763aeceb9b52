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
