"""The knobs a run is measured under, and how each is applied and undone on a target.

- `base`: `Setting` (an `Option` with a scope, an `apply` and an `unavailable` check) and `RunContext`;
- `registry`: `SETTINGS`, the one list of settings, with the probe's and the BEAM's own knobs;
- `governor`, `loadgen`, `environments` (with `containers`), `vm_flags`, `kernel_files` (IRQ affinity, the
  workqueue CPU mask, RT throttling), `pm_qos` (cpu_dma_latency), `kernel_cmdline` (a VM's boot): the system
  settings and what they need;
- `undo`: kernel files a setting changes and their original values put back, also after a `kill -9`;
- `explain_record` (setting `explain`): the kernel trace of the probe's CPUs (targets/tracefs.py) and the BEAM's
  own trace, turned into the causes of the worst samples (the attribution itself: the leaf `explain_trace`);
  `explain_beam_kernel`: for BEAM runs, what the OS took from the VM's scheduler threads, merged with the BEAM's
  own causes.

It may import the targets, the VM machinery and the leaf modules; runtimes, experiments and everything above
import it. It never touches the store.
"""
