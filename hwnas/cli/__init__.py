"""The ``nas`` command line: the top parser, dispatch and error handling.

Each command is a module of this package with ``add_parser(sub)`` and its ``cmd_*(args)``, which parses its
options, makes one library call and prints; what a command does beyond that lives in the library, where the
Python API reaches it too. A command module imports its heavy dependencies inside its functions, so that
``import hwnas.cli`` and ``nas --version`` stay light.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from types import ModuleType

from hwnas import __version__
from hwnas.errors import HwnasError

EPILOG = """examples:
  nas run experiments/quickstart.yaml                  run the quickstart search (2 to 5 minutes on 2 cores)
  nas run experiments/quickstart.yaml --set budget.trials=12
  nas run --resume runs/quickstart                     continue a run that was stopped or killed
  nas validate experiments/quickstart.yaml             check a file and build everything, run nothing
  nas report runs/quickstart                           the Pareto front as a table
  nas list spaces -v                                   registered components with their parameters
"""

#: Every command, in the order ``nas --help`` lists them: its module in ``hwnas.cli`` and the function running it.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("run", "cmd_run"),
    "sweep": ("sweep", "cmd_sweep"),
    "validate": ("validate", "cmd_validate"),
    "report": ("report", "cmd_report"),
    "export": ("export", "cmd_export"),
    "latency": ("latency", "cmd_latency"),
    "bench": ("bench", "cmd_bench"),
    "predictor": ("predictor", "cmd_predictor"),
    "supernet": ("supernet", "cmd_supernet"),
    "list": ("listing", "cmd_list"),
}


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"hwnas.cli.{name}")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="nas", description="hwnas: hardware-aware neural architecture search.", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"hwnas {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for module, _ in COMMANDS.values():
        _module(module).add_parser(sub)
    return p


def _command(name: str) -> Callable[[argparse.Namespace], int]:
    module, function = COMMANDS[name]
    command: Callable[[argparse.Namespace], int] = getattr(_module(module), function)
    return command


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``nas`` script; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    if args.command is None:
        parser.print_help()
        return 0
    try:
        _check_options(args)
        return int(_command(args.command)(args) or 0)
    except HwnasError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader of our output went away (nas ... | head): stop quietly
        try:
            sys.stdout = open(os.devnull, "w")  # so the interpreter's final flush cannot fail
        except OSError:
            pass
        return 141
    except OSError as exc:  # a path that cannot be read or written: one line, naming it
        logging.getLogger(__name__).debug("OS error", exc_info=True)
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print(_interrupted(args, exc), file=sys.stderr)
        return 130


def _check_options(args: argparse.Namespace) -> None:
    """The options every command shares, by one rule each: a ``--seed`` is a seed as in the files
    (:func:`hwnas.fileio.check_seed`)."""
    from hwnas.errors import ConfigError
    from hwnas.fileio import check_seed

    value = getattr(args, "seed", None)
    if value is not None:
        try:
            check_seed(value)
        except ValueError as exc:
            raise ConfigError(f"--seed {value}: {exc}") from None


def _interrupted(args: argparse.Namespace, exc: KeyboardInterrupt) -> str:
    """What Ctrl-C left, and how to go on."""
    if args.command == "run":
        run_dir = getattr(exc, "run_dir", None)
        resume = f"nas run --resume {run_dir}" if run_dir is not None else "nas run --resume RUN_DIR"
        return f"interrupted: the journal keeps every finished evaluation; continue with {resume}"
    if args.command == "sweep":
        return (f"interrupted: finished trials are kept (results so far in {getattr(exc, 'sweep_dir', 'the sweep')}"
                f"); continue with nas sweep {args.file} --resume")
    if args.command == "latency" and getattr(args, "latency_command", None) == "profile":
        return "interrupted: every unit measured so far is in the table; run the same command again to continue"
    if args.command == "latency":
        return "interrupted: nothing was written (files already there are unchanged)"
    return "interrupted"
