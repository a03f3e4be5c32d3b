"""What the subcommand modules share: the type of the subparsers action each ``add_parser`` registers into."""

from __future__ import annotations

import argparse
from typing import TypeAlias

#: argparse's subparsers action (``ArgumentParser.add_subparsers()``), as the ``add_parser`` functions take it
#: (a string: the class is generic only to type checkers).
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
