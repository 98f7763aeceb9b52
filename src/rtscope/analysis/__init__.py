"""Analysis: what the numbers of stored runs are, computed in one place; the CLI and the report only render.

- `distribution`: a run's figures (or its worst thread's) and where they come from, raw samples or histograms;
- `threads`: a multi-thread latency run split into its threads and CPUs, and the one rule that merges them;
- `storage`, `tasks`: the study tables (study 4's storage table, study 5's switch table).

Beside them, one level up for now: `stats` (the statistics themselves), `compare` (configurations of runs,
their tests and verdicts), `recommend`, `fit` (study 5's memory fit) and `results` (display helpers).
"""
