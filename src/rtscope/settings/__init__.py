"""The knobs a run is measured under, and how each is applied and undone on a target.

- `base`: `Setting` (an `Option` with a scope, an `apply` and an `unavailable` check) and `RunContext`;
- `registry`: `SETTINGS`, the one list of settings, with the probe's and the BEAM's own knobs;
- `governor`, `loadgen`, `environments` (with `containers`), `vm_flags`: the system settings and what they need;
- `explain`: the kernel trace of the probe's CPUs (targets/tracefs.py) and the BEAM's own trace, turned into the
  causes of the worst samples.

It may import the targets, the VM machinery and the leaf modules; runtimes, experiments and everything above
import it. It never touches the store.
"""
