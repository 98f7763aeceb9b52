"""The Python API for notebooks: stored runs and samples as pandas DataFrames.

    import rtscope
    d = rtscope.load("rtscope.db", experiment="study1", settings={"governor": "performance"})
    d.runs                    # one row per run (metadata, settings flattened to columns)
    d.samples                 # every sample of those runs, long format (loaded on first use)
    d.stats()                 # one row per run: n, min, mean, max, var, stdev, p50 ... p99.99
    d.compare(["governor=conservative"]).to_json()

`runs` columns: run_id, experiment_id, cell, repetition, workload, variant,
runtime, configuration (a label unique per configuration; runs with the same
label are repetitions), measure (name of the primary column), unit, n_samples,
tool, tool_version, started_at, finished_at, tags (list); then one column per
setting under its own name (missing where a run did not set it), then one
column per workload parameter as `param.<name>`. A setting whose name is one of
the fixed columns gets the prefix `setting.`.

`samples` columns: run_id, sample (0-based position in the run), value (the
primary column, in the run's unit: ns or bytes), then every side column by
name (heap_size, minor_gcs, cpu, ...; missing where a run lacks it).
Histogram-only runs have no rows in `samples` (their n_samples is 0).

pandas is imported only when `load` is called, so `import rtscope` stays fast.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from .analysis.compare import ComparisonSet
    from .store import Run, Store

FIXED = ("run_id", "experiment_id", "cell", "repetition", "workload", "variant", "runtime", "configuration",
         "measure", "unit", "n_samples", "tool", "tool_version", "started_at", "finished_at", "tags")


@dataclass
class Dataset:
    """Selected runs of a store: `runs` at once, `samples` when first used."""

    store: "Store"
    run_list: list["Run"]
    runs: "pd.DataFrame"
    _samples: "pd.DataFrame | None" = field(default=None, repr=False)

    @property
    def samples(self) -> "pd.DataFrame":
        if self._samples is None:
            import pandas as pd
            frames = [self.samples_of(r.id) for r in self.run_list if r.n_samples > 0]
            self._samples = pd.concat(frames, ignore_index=True) if frames else \
                pd.DataFrame({"run_id": pd.Series(dtype="int64"), "sample": pd.Series(dtype="int64"),
                              "value": pd.Series(dtype="float64")})
        return self._samples

    def samples_of(self, run_id: int) -> "pd.DataFrame":
        """The samples of one run (run_id, sample, value, side columns)."""
        import numpy as np
        import pandas as pd
        run = next((r for r in self.run_list if r.id == run_id), None)
        if run is None:
            from .errors import UsageError
            raise UsageError(f"run {run_id} is not in this dataset; its runs: "
                             f"{', '.join(str(r.id) for r in self.run_list)}")
        data = self.store.samples(run.id)
        primary = run.primary["name"]
        n = len(data.get(primary, ()))
        cols = {"run_id": np.full(n, run.id, dtype=np.int64), "sample": np.arange(n, dtype=np.int64),
                "value": data.get(primary, np.empty(0))}
        cols.update({c["name"]: data[c["name"]] for c in run.columns[1:] if c["name"] in data})
        return pd.DataFrame(cols)

    def stats(self) -> "pd.DataFrame":
        """One row per run: its summary statistics (from the histogram for histogram-only runs)."""
        import pandas as pd
        from .analysis.results import run_stats
        return pd.DataFrame([{"run_id": r.id, **run_stats(self.store, r)} for r in self.run_list])

    def compare(self, baseline: list[str] | str, **options: Any) -> "ComparisonSet":
        """Significance-tested comparison of these runs' configurations (see rtscope.analysis.compare)."""
        from .analysis.compare import compare_runs
        return compare_runs(self.store, self.run_list, [baseline] if isinstance(baseline, str) else baseline,
                            **options)


def load(db: str | None = None, experiment: str | int | None = None, workload: str | None = None,
         tag: str | list[str] | None = None, settings: dict[str, Any] | None = None, *,
         variant: str | None = None, runtime: str | None = None) -> Dataset:
    """Runs of a store (path or SQLAlchemy URL; default $RTSCOPE_DB or ./rtscope.db) matching every criterion.

    `settings` maps a setting (or parameter) name to a value, or to a list of values any of which matches;
    None as a value matches runs without that setting."""
    import pandas as pd

    from .analysis.select import Configuration, Selection, select_runs, short_labels, value_text
    from .store import Store

    store = Store(db)
    where = []
    for name, value in (settings or {}).items():
        for v in value if isinstance(value, (list, tuple, set)) else [value]:
            where.append((name, value_text(v)))
    tags = [tag] if isinstance(tag, str) else list(tag or [])
    sel = Selection(None if experiment is None else str(experiment), workload, variant, runtime, tags, where)
    found = select_runs(store, sel)
    configs = {r.id: Configuration.of(r) for r in found}
    labels = short_labels(configs.values())
    rows = []
    for r in found:
        row = {"run_id": r.id, "experiment_id": r.experiment_id, "cell": r.cell, "repetition": r.repetition,
               "workload": r.workload, "variant": r.variant, "runtime": r.runtime,
               "configuration": labels[configs[r.id]], "measure": r.primary["name"],
               "unit": r.primary.get("unit", ""), "n_samples": r.n_samples, "tool": r.tool,
               "tool_version": r.tool_version, "started_at": r.started_at, "finished_at": r.finished_at,
               "tags": list(r.tags)}
        for name, value in r.settings.items():
            row[f"setting.{name}" if name in FIXED else name] = value
        for name, value in r.params.items():
            row[f"param.{name}"] = value
        rows.append(row)
    return Dataset(store, found, pd.DataFrame(rows))
