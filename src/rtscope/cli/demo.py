"""rtscope demo: a short default experiment on this machine (specs/demo.toml), one table."""

from __future__ import annotations

from .. import paths
from .common import DbOption, app, open_store, settle
from .run import (ScaleOption, print_machine_warnings, print_next, print_results, refuse_unrunnable,
                  run_experiment)


@app.command()
def demo(db: DbOption = None, scale: ScaleOption = None) -> None:
    """Run a short default experiment on this machine (specs/demo.toml) and print one table."""
    from ..experiment import execute as exp_mod, spec as spec_mod
    from ..targets import Pool
    path = paths.find_spec("demo")
    parsed = spec_mod.load(path, scale)
    seed = parsed.seed if parsed.seed is not None else exp_mod.new_seed()
    planned = exp_mod.plan(parsed, seed)
    with Pool() as pool:
        refuse_unrunnable(planned, str(path), pool)
        store = open_store(db)
        experiment = exp_mod.start(store, parsed, planned, seed, exp_mod.spec_identity(path))
        print_machine_warnings(experiment, pool)
        outcome = run_experiment(store, experiment, str(path), pool)
    settle(store, f"experiment {experiment.id}")
    print_results(store, outcome, parsed, f"rtscope demo ({store.url})")
    print_next(store, experiment, parsed, db)
