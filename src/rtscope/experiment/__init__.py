"""The experiment layer: from a spec to stored runs.

- `spec/`: a spec's text parsed and checked (every problem with its line) into cells of run requests;
- `execute`: an experiment's plan (seeded order), its record in the store, its resumable execution on its
  targets (a fleet in parallel);
- `runner`: one run on one target: settings applied and undone, the probe launched, its sample file stored;
- `bounds`: a run's deadline from its expected duration or earlier runs, a run stopped at it recorded as failed,
  a run whose target was lost made once more after reconnecting (docs/targets.md);
- `monitor`: long-term monitoring as a plan of histogram runs per interval;
- `fleet`: a fleet's monitoring from one process, the lab's leases, `rtscope lab`'s status;
- `plan_spec`: `rtscope plan`: a spec sized from its pilot runs, and the sized spec written (docs/plan.md);
- `explain_spec`: `rtscope explain --suggest/--write-spec`: which remedies a run's target can apply, and the A/B
  spec that measures them (docs/explain.md);
- `claim_runs`: `rtscope reproduce`: the runs a spec's claims need, and the claims this machine cannot measure
  (docs/reproduction.md);
- `tune/`: `rtscope tune`, a search of a knob space raced on fresh runs (docs/tune.md).

It may import the analysis, runtimes, settings, importers, store, targets and the leaf modules; only the report
and the user interfaces import it.
"""
