"""``nas validate``: check an experiment file and build every component; run nothing."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hwnas.cli.parsing import Subparsers
    from hwnas.search_spaces.base import SearchSpace


def add_parser(sub: Subparsers) -> None:
    """Register ``nas validate``."""
    v = sub.add_parser("validate", help="check an experiment file and build every component; run nothing",
                       description="Load, validate and build an experiment (registry lookups, parameters, "
                                   "cross-checks) and report every problem at once. Runs nothing, writes nothing.")
    v.add_argument("file")
    v.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")


def cmd_validate(args: argparse.Namespace) -> int:
    from hwnas.experiments import load_experiment
    from hwnas.objectives import reference_point

    exp = load_experiment(args.file, args.overrides)
    exp.check_inputs()  # what a run would check before its first trial: tables, images, export opset
    providers = exp.metric_providers()
    print(f"{args.file}: ok")
    print(f"  space      {exp.config.space.name} ({space_size(exp.space)} architectures)")
    print(f"  strategy   {exp.config.strategy.name}, budget {exp.config.budget.trials} trials")
    mf = exp.config.multi_fidelity
    if mf is not None and exp.fidelity_index is not None:
        bracket = exp.config.budget.batch_size
        counts = mf.bracket_counts(bracket)
        rungs = ", ".join(f"{r.fidelity!r} ({n} x {r.cost:g})" for n, r in zip(counts, mf.rungs))
        print(f"  fidelity   evaluators[{exp.fidelity_index}] ({exp.evaluator_names[exp.fidelity_index]}) rungs per "
              f"bracket of {bracket}: {rungs} = {mf.bracket_cost(bracket):g} {mf.unit}; {mf.brackets(bracket)} "
              f"brackets in {mf.budget:g} {mf.unit}, promote {mf.promote:g}")
    for name, ev in zip(exp.evaluator_names, exp.evaluators):
        print(f"  evaluator  {name} ({'cheap' if ev.cheap else 'expensive'}): {', '.join(ev.provides)}")
    reference = reference_point(exp.objectives, exp.constraints)
    for o, value, source in zip(exp.objectives, reference.values, reference.sources):
        if value is not None:
            ref = f"hypervolume reference {value:g}, from {source}"
        elif source.startswith("none"):
            ref = f"no hypervolume reference: {source}"
        else:  # a relative constraint's bound, measured when the run starts
            ref = f"hypervolume reference from {source}"
        print(f"  objective  {o.direction} {o.metric} (from {providers[o.metric]}; {ref})")
    for c in exp.constraints:
        print(f"  constraint {c.describe()}")
    note = exp.budget_note()
    if note:
        print(f"  note       {note}")
    executor_params = ", ".join(f"{k}={v}" for k, v in exp.params["executor"].items() if v is not None)
    print(f"  executor   {exp.config.executor.name}" + (f" ({executor_params})" if executor_params else ""))
    return 0


def space_size(space: SearchSpace) -> str:
    """The number of architectures of a space, or ``?`` when it cannot say."""
    try:
        return f"{space.size():,}"
    except NotImplementedError:
        return "?"
