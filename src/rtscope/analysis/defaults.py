"""The analysis' defaults and named choices that the CLI shows in its help before it computes anything.

No numpy and no store here, so that `rtscope --help` stays light (cli/common.py); the modules that use these
names (compare, recommend) import them from here.
"""

ALPHA = 0.05          # significance level after Holm's correction
GOALS = ("max", "p99", "stdev", "mean", "median")  # what `recommend` can minimise
METRICS = ("mean", "median", "p99", "max", "stdev")  # what `compare` tests, each minimised
STAT_KEY = {"mean": "mean", "median": "p50", "p99": "p99", "max": "max", "stdev": "stdev"}  # its statistics key
