"""Analysis: every number of stored runs, computed in one place; the CLI, the report and the API only render.

- `stats`: the statistics themselves (exact integer percentiles, histograms, bootstrap);
- `distribution`: a run's figures (or its worst thread's) and where they come from, raw samples or histograms;
- `threads`: a multi-thread latency run split into its threads and CPUs, and the one rule that merges them;
- `select`: runs grouped into configurations (cells) by their settings, and selections of runs;
- `compare`: configurations against a baseline (or runs stored earlier), their tests and Holm-corrected verdicts;
- `gate`: `compare --fail-on`: which rows fail a CI gate (the JUnit file is `report.junit`);
- `recommend`: the best configuration for a goal and its cost on the other metrics;
- `results`: a run's statistics for display, units and formatting;
- `variance`: a statistic's between-run and within-run variance components;
- `documents`: the JSON of `runs`, `show`, `compare --json`, which the serve API returns too;
- `defaults`: the goals, metrics and level shared with the CLI's options (no numpy: `--help` stays light);
- `fit`, `storage`, `tasks`: study 5's memory fit and the study tables (storage, tasks);
- explain (docs/explain.md): `explain_shares` the explained samples' causes summed up: shares of the excess per
  kind and culprit; `explain_remedies` the settings that would take each culprit off the measured task's way;
- plan (docs/plan.md): `plan_sizing` runs × samples per run to detect a change, from variance components and a
  run's cost;
- tail (docs/tail.md): `tail_bound` the worst case with a bound, the pipeline over `tail_checks` (its assumptions
  tested) and `tail_fit` (the extreme-value fits of a run's or a configuration's tail);
- claims (docs/reproduction.md): `claims` a spec's claims judged by compare's run-level tests, with the runs a
  claim still needs from `plan_sizing`; `paper_published` a study's table layouts and the figures it published.

It may import the store, the settings' value vocabulary (`options`) and the leaf modules; nothing below it
imports it.
"""
