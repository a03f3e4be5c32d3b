"""MkDocs hooks of the hwnas site (mkdocs.yml `hooks:`).

- The reference pages are generated from the code at build time: a page holding ``<!-- generated: components -->``
  gets every registered component with its parameters, defaults and descriptions (what ``nas list -v`` prints, from
  the same function), one holding ``<!-- generated: cli -->`` every command's ``--help`` from its argparse parser.
- Every relative link of every page is checked with its line: a link to a page or file that does not exist is a
  warning ``docs/PAGE.md:LINE: ...``, which ``mkdocs build --strict`` turns into a failed build.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
from pathlib import Path
from typing import Any

log = logging.getLogger("mkdocs.hooks.hwnas")  # under "mkdocs": strict mode counts its warnings

GENERATED = re.compile(r"<!-- generated: (\w+) -->")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


# ------------------------------------------------------------------------------------------- links, with lines


def broken_links(markdown: str, page: str, exists: Any) -> list[str]:
    """``PAGE:LINE: link ...`` for every relative link (outside code) whose target ``exists(path)`` denies.

    ``page`` is the page's path relative to the docs folder; targets are resolved against its folder."""
    problems = []
    in_fence = False
    base = Path(page).parent
    for number, line in enumerate(markdown.splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        for match in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            target = match.group(1) or match.group(2)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
                continue
            path = target.split("#", 1)[0]
            if not path:
                continue
            resolved = os.path.normpath(base / path).replace(os.sep, "/")
            if not exists(resolved):
                problems.append(f"docs/{page}:{number}: link to '{target}', but no page or file "
                                f"'{resolved}' is in docs/")
    return problems


# ------------------------------------------------------------------------------------------ generated reference


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def components_markdown() -> str:
    """Every registered component, kind by kind: its one-line doc and its parameters (name, default, description)."""
    from hwnas.cli.listing import param_rows
    from hwnas.cli.validate import space_size
    from hwnas.evaluation import EVALUATORS
    from hwnas.experiments.executors import EXECUTORS
    from hwnas.latency.backends import BACKENDS
    from hwnas.predictors import PREDICTORS
    from hwnas.registry import first_doc_line
    from hwnas.search_spaces import SPACES
    from hwnas.strategies import ONE_SHOT_STRATEGIES, STRATEGIES
    from hwnas.supernet import SUPERNETS

    kinds: list[tuple[str, Any, str]] = [
        ("Search spaces", SPACES, "space"), ("Strategies", STRATEGIES, "strategy"),
        ("One-shot strategies", ONE_SHOT_STRATEGIES, "strategy"), ("Evaluators", EVALUATORS, "evaluators"),
        ("Executors", EXECUTORS, "executor"), ("Predictors", PREDICTORS, "predictor"),
        ("Supernets", SUPERNETS, "supernet"), ("Latency backends", BACKENDS, "--backend"),
    ]
    out: list[str] = []
    for title, registry, key in kinds:
        out.append(f"## {title}\n")
        out.append(f"Named under `{key}` ({len(registry.names())} registered).\n")
        for name, cls in registry.items():
            if name == "fake":  # hwnas.testing's test double, registered only when that package is imported
                continue
            out.append(f"### `{name}` {{ #{title.split()[0].lower()}-{name} }}\n")
            out.append(f"{first_doc_line(cls) or '(no docstring)'}\n")
            params = param_rows(cls) if hasattr(cls, "Params") else []
            if params:
                out.append("| parameter | default | description |\n| --- | --- | --- |")
                out += [f"| `{n}` | `{_cell(d)}` | {_cell(desc)} |" for n, d, desc in params]
                out.append("")
            else:
                out.append("No parameters.\n")
            if registry is SPACES:
                space = cls()
                genes = list(space.genes())
                out.append(f"Size with the defaults: {space_size(space)} architectures; {len(genes)} genes.\n")
                out.append("??? note \"Genes and their choices\"\n    ```text")
                out += [f"    {g.name}: {list(g.choices)}" for g in genes]
                out.append("    ```\n")
    return "\n".join(out)


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    found: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append((name, sub))
    return found


def cli_markdown() -> str:
    """``nas --help`` and every command's and sub-command's ``--help``, from the parsers themselves."""
    from hwnas.cli import _parser

    os.environ["COLUMNS"] = "110"  # argparse wraps to the terminal: the same page on every machine
    out: list[str] = []

    def walk(prog: str, parser: argparse.ArgumentParser, level: int) -> None:
        out.append(f"{'#' * level} `{prog}`\n")
        out.append("```text\n" + parser.format_help().rstrip() + "\n```\n")
        for name, sub in _subcommands(parser):
            walk(f"{prog} {name}", sub, min(level + 1, 4))

    walk("nas", _parser(), 2)
    return "\n".join(out)


GENERATORS = {"components": components_markdown, "cli": cli_markdown}


# ------------------------------------------------------------------------------------------------------ hooks


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any, **kwargs: Any) -> str:
    src = page.file.src_uri
    names = {f.src_uri for f in files}
    for problem in broken_links(markdown, src, lambda p: p in names):
        log.warning(problem)

    def generate(match: re.Match[str]) -> str:
        which = match.group(1)
        if which not in GENERATORS:
            log.warning(f"docs/{src}: unknown generated section '{which}' (known: {', '.join(GENERATORS)})")
            return match.group(0)
        return GENERATORS[which]()

    return GENERATED.sub(generate, markdown)
