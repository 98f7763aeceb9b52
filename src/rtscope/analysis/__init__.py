"""Analysis: every number of stored runs, computed in one place; the CLI, the report and the API only render.

- `stats`: the statistics themselves (exact integer percentiles, histograms, bootstrap);
- `distribution`: a run's figures (or its worst thread's) and where they come from, raw samples or histograms;
- `threads`: a multi-thread latency run split into its threads and CPUs, and the one rule that merges them;
- `select`: runs grouped into configurations (cells) by their settings, and selections of runs;
- `compare`: configurations against a baseline (or runs stored earlier), their tests and Holm-corrected verdicts;
- `gate`: `compare --fail-on`: which rows fail a CI gate (the JUnit file is `report.junit`);
- `recommend`: the best configuration for a goal and its cost on the other metrics;
- `results`: a run's statistics for display, units and formatting;
- `fit`, `storage`, `tasks`: study 5's memory fit and the study tables (storage, tasks);
- `causes`: the explained samples' causes summed up: shares of the excess per kind and culprit;
- `plan`: runs × samples per run to detect a change, from variance components and a run's cost (docs/plan.md).
- `tail` (with `tail_checks`, `tail_fit`): the worst case with a bound, an extreme-value fit of a run's or a
  configuration's tail after its assumptions are tested (docs/tail.md).

It may import the store, the settings' value vocabulary (`options`) and the leaf modules; nothing below it
imports it.
"""
