"""``nas list``: registered components with their one-line docs (and parameters)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hwnas.cli.parsing import Subparsers

KINDS = ["spaces", "strategies", "evaluators", "executors", "predictors", "supernets"]


def add_parser(sub: Subparsers) -> None:
    """Register ``nas list``."""
    ls = sub.add_parser("list", help="list registered spaces, strategies, evaluators, executors, predictors, supernets",
                        description="List registered components with their one-line docs.")
    ls.add_argument("kind", nargs="?", choices=KINDS, help="only this kind")
    ls.add_argument("-v", "--verbose", action="store_true", help="also parameters (and genes and size for spaces)")


def cmd_list(args: argparse.Namespace) -> int:
    from hwnas.cli.validate import space_size
    from hwnas.evaluation import EVALUATORS
    from hwnas.experiments.executors import EXECUTORS
    from hwnas.predictors import PREDICTORS
    from hwnas.registry import Registry, first_doc_line
    from hwnas.search_spaces import SPACES
    from hwnas.strategies import ONE_SHOT_STRATEGIES, STRATEGIES
    from hwnas.supernet import SUPERNETS

    kinds: dict[str, Registry[Any]] = {
        "spaces": SPACES, "strategies": STRATEGIES, "one-shot strategies": ONE_SHOT_STRATEGIES,
        "evaluators": EVALUATORS, "executors": EXECUTORS, "predictors": PREDICTORS, "supernets": SUPERNETS}
    for kind, registry in kinds.items():
        if args.kind and args.kind != kind and not (args.kind == "strategies" and kind == "one-shot strategies"):
            continue
        print(f"{kind}:")
        for name, cls in registry.items():
            print(f"  {name:14s} {first_doc_line(cls)}")
            if args.verbose:
                _print_params(cls)
                if kind == "spaces":
                    space = cls()
                    print(f"      size: {space_size(space)} architectures")
                    for g in space.genes():
                        print(f"      gene {g.name}: {list(g.choices)}")
    return 0


def param_rows(cls: Any) -> list[tuple[str, str, str]]:
    """A component's parameters as (name, default as a user writes it, description).

    The default of a parameter that must be given reads ``(required)``. ``nas list -v`` prints these, and the docs'
    component reference is generated from them."""
    rows = []
    for fname, field in cls.Params.model_fields.items():
        if field.is_required():
            default = "(required)"
        else:
            default = _as_yaml(field.default if field.default_factory is None else field.default_factory())
        rows.append((fname, default, field.description or ""))
    return rows


def _print_params(cls: Any) -> None:
    for fname, default, description in param_rows(cls):
        desc = f"  {description}" if description else ""
        print(f"      {fname} = {default}{desc}")


def _as_yaml(value: object) -> str:
    """A parameter's default as a user would write it in an experiment file (YAML flow style)."""
    import yaml
    from pydantic_core import to_jsonable_python

    try:
        text = yaml.safe_dump(to_jsonable_python(value), default_flow_style=True, width=1 << 20, sort_keys=False)
    except Exception:  # not plain data: as Python shows it
        return repr(value)
    return text.removesuffix("\n...\n").strip()
