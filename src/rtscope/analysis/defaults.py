"""The analysis' defaults and named choices that the CLI shows in its help before it computes anything.

No numpy and no store here, so that `rtscope --help` stays light (cli/common.py); the modules that use these
names (compare, recommend) import them from here.
"""

# The advice on repetitions, said in one place: compare's warning and untested rows, reproduce's claims.
MIN_REPETITIONS = 3   # fewer: the between-run variance rests on one or two differences, and a warning says so
REPEAT_ADVICE = f"repeat each configuration {MIN_REPETITIONS} times or more (`rtscope plan` says how many)"


def plural(n: int, word: str, words: str | None = None) -> str:
    """'1 run', '3 runs', '1,000 samples'."""
    return f"{n:,} {word if n == 1 else (words or word + 's')}"


def few_runs_reason(mine: int, base: int | None, what: str = "", also: str = "") -> str:
    """Why a test was not made: a side with a single run (mine vs base runs; base None: one side only). `what`
    follows the counts (" with a p99"), `also` the consequence (", and the runs needed cannot be computed")."""
    counts = plural(mine, "run") if base is None else f"{plural(mine, 'run')} vs {plural(base, 'run')}"
    sides = "the side has" if base is None else "each side has" if mine < 2 and base < 2 else "one side has"
    return (f"{counts}{what}: {sides} a single run, so the between-run variation is unknown and nothing is "
            f"tested{also}; {REPEAT_ADVICE}")


ALPHA = 0.05          # significance level after Holm's correction
GOALS = ("max", "p99", "stdev", "mean", "median")  # what `recommend` can minimise
METRICS = ("mean", "median", "p99", "max", "stdev")  # what `compare` tests, each minimised
TAIL = "tail"         # compare's tail row: the latency exceeded with p = 1e-9 per sample (analysis/tail_bound.py)
ROWS = (*METRICS, TAIL)  # every row compare can test, and what --fail-on worse:METRIC may name
STAT_KEY = {"mean": "mean", "median": "p50", "p99": "p99", "max": "max", "stdev": "stdev"}  # its statistics key
