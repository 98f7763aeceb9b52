"""The proposal engine: Optuna's TPE sampler over the space, seeded, rebuilt from the tune's stored history.

The study lives in memory and is rebuilt at every round from the candidates in rtscope's store (their knobs
and the goal value their race runs give so far), with a sampler seeded by the tune's seed and the round:
whichever process plans a round proposes the same candidates, and nothing but rtscope's own tables has to
be shared. TPE handles categorical, integer and log axes together. An integer log range that starts at 0
(fullsweep_after = { min = 0, max = 65535, log = true }) is sampled as value + 1 on [1, max + 1].
"""

from __future__ import annotations

import warnings
from typing import Any

from .space import Space

ATTEMPTS = 20   # asks per wanted candidate before the space counts as exhausted
SAMPLER_SEEDS = 2**32   # Optuna's samplers seed numpy's RandomState, which takes 0..2**32-1 only


def sampler_seed(seed: int) -> int:
    """A seed the sampler takes, from any seed rtscope derives (a spec's seed may be up to 2**63-1, a fresh one is
    32 bits and rounds.py multiplies it by the round): the same for a seed already in range."""
    return seed % SAMPLER_SEEDS


def _distributions(space: Space) -> dict[str, Any]:
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
    out: dict[str, Any] = {}
    for k in space.knobs:
        r = k.range
        if r is None:
            out[k.name] = CategoricalDistribution(list(k.values))
        elif r.integer:
            shift = 1 if r.log and r.low == 0 else 0
            out[k.name] = IntDistribution(int(r.low) + shift, int(r.high) + shift, log=r.log, step=int(r.step or 1))
        else:
            out[k.name] = FloatDistribution(float(r.low), float(r.high), log=r.log, step=r.step)
    return out


def _shifted(space: Space, name: str, value: Any, sign: int) -> Any:
    """A value into (+1) or out of (-1) Optuna's axis: an integer log range from 0 is sampled one up."""
    r = space.knob(name).range
    return value + sign if r is not None and r.integer and r.log and r.low == 0 else value


def _study(space: Space, history: list[tuple[dict, float | None]], seed: int, startup: int):
    import optuna
    from optuna.trial import create_trial
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.TPESampler(seed=sampler_seed(seed), n_startup_trials=startup, constant_liar=True)
    study = optuna.create_study(direction="minimize", sampler=sampler)
    dists = _distributions(space)
    for knobs, value in history:
        if value is None:
            continue
        params = {n: _shifted(space, n, v, +1) for n, v in knobs.items() if n in dists and space.contains(n, v)}
        if params:
            study.add_trial(create_trial(params=params, distributions={n: dists[n] for n in params}, value=value))
    return study, dists


def propose(space: Space, history: list[tuple[dict, float | None]], want: int, seed: int,
            startup: int) -> list[dict]:
    """Up to `want` new configurations, none already in `history`; fewer when the space is exhausted."""
    if want <= 0:
        return []
    study, dists = _study(space, history, seed, startup)
    known = {space.key(k): v for k, v in history}
    out: list[dict] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(want * ATTEMPTS):
            if len(out) == want:
                break
            trial = study.ask(dists)
            knobs = {n: _shifted(space, n, v, -1) for n, v in trial.params.items()}
            key = space.key(knobs)
            if key in known:
                if known[key] is not None:
                    study.tell(trial, known[key])
                else:
                    study.tell(trial, state=_failed())
                continue
            known[key] = None
            out.append(knobs)
    return out


def importance(space: Space, history: list[tuple[dict, float | None]], seed: int) -> dict[str, float]:
    """Optuna's importance of each knob for the goal over the raced candidates ({} with too few of them)."""
    import optuna
    study, _ = _study(space, history, seed, 1)
    if len(study.trials) < 3 or len({t.value for t in study.trials}) < 2:
        return {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            found = optuna.importance.get_param_importances(study)
        except (RuntimeError, ValueError):
            return {}
    return {name: round(float(v), 4) for name, v in found.items()}


def _failed():
    from optuna.trial import TrialState
    return TrialState.FAIL
