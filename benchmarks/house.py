"""Figures on the package's shape: import circles, files and lines per room, signatures mentioning ``Any``.

    python benchmarks/house.py            # a table on stdout
    python benchmarks/house.py --json     # the same figures as JSON

Import circles are the strongly connected components (more than one module) of the import graph that grimp
(import-linter's graph library) builds for ``hwnas``; every import counts, including those deferred into functions,
except imports under ``if TYPE_CHECKING:``. A room is a top-level entry of ``hwnas/`` (a subpackage, or the core
modules taken together). The ``Any`` share is the fraction of function signatures (``def``, methods included)
whose annotations name ``Any``, over the package and per room.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "hwnas"


def import_circles() -> list[list[str]]:
    """Every strongly connected component of more than one module, members sorted, largest first."""
    import grimp

    graph = grimp.build_graph("hwnas", exclude_type_checking_imports=True)
    modules = sorted(graph.modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in modules}
    return sorted((sorted(c) for c in _strongly_connected(modules, edges) if len(c) > 1), key=lambda c: (-len(c), c))


def _strongly_connected(nodes: list[str], edges: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (the graph is small, but recursion depth is not worth the risk)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in nodes:
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            successors = edges.get(node, [])
            if i < len(successors):
                work.append((node, i + 1))
                nxt = successors[i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                out.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return out


def rooms() -> dict[str, tuple[int, int]]:
    """Room -> (files, lines) over ``hwnas/`` (the top-level modules together as ``core``)."""
    out: dict[str, tuple[int, int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        room = rel.parts[0] if len(rel.parts) > 1 else "core"
        files, lines = out.get(room, (0, 0))
        out[room] = (files + 1, lines + len(path.read_text().splitlines()))
    return out


def any_share() -> tuple[int, int]:
    """(signatures whose annotations name Any, all signatures) over ``hwnas/``."""
    by_room = any_share_by_room()
    return sum(a for a, _ in by_room.values()), sum(t for _, t in by_room.values())


def any_share_by_room() -> dict[str, tuple[int, int]]:
    """Room -> (signatures whose annotations name Any, all signatures), rooms as in :func:`rooms`."""
    out: dict[str, tuple[int, int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        room = rel.parts[0] if len(rel.parts) > 1 else "core"
        with_any, total = out.get(room, (0, 0))
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            total += 1
            args = node.args
            annotations = [a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs) if a.annotation]
            annotations += [a.annotation for a in (args.vararg, args.kwarg) if a is not None and a.annotation]
            if node.returns is not None:
                annotations.append(node.returns)
            if any(_names_any(a) for a in annotations):
                with_any += 1
        out[room] = (with_any, total)
    return out


def _names_any(annotation: ast.expr) -> bool:
    for sub in ast.walk(annotation):
        if isinstance(sub, ast.Name) and sub.id == "Any":
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "Any":
            return True
        text = sub.value if isinstance(sub, ast.Constant) and isinstance(sub.value, str) else ""
        if "Any" in re.split(r"[^A-Za-z_]+", text):
            return True
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    circles = import_circles()
    room_figures = rooms()
    by_room = any_share_by_room()
    with_any, total = sum(a for a, _ in by_room.values()), sum(t for _, t in by_room.values())
    if args.json:
        json.dump({"import_circles": circles, "rooms": {k: {"files": f, "lines": n, "signatures": by_room[k][1],
                                                            "signatures_with_any": by_room[k][0]}
                                                        for k, (f, n) in room_figures.items()},
                   "signatures": total, "signatures_with_any": with_any}, sys.stdout, indent=1)
        print()
        return 0
    print(f"import circles (grimp graph, strongly connected components): {len(circles)}")
    for c in circles:
        print(f"  {len(c):2d} modules: {', '.join(c)}")
    print(f"\n{'room':16s} {'files':>6s} {'lines':>7s} {'signatures':>10s} {'naming Any':>10s} {'share':>7s}")
    for room, (files, lines) in sorted(room_figures.items()):
        room_any, room_total = by_room[room]
        share = 100 * room_any / room_total if room_total else 0.0
        print(f"{room:16s} {files:6d} {lines:7d} {room_total:10d} {room_any:10d} {share:6.1f}%")
    print(f"{'total':16s} {sum(f for f, _ in room_figures.values()):6d} {sum(n for _, n in room_figures.values()):7d}"
          f" {total:10d} {with_any:10d} {100 * with_any / total:6.1f}%")
    print(f"\nsignatures naming Any: {with_any} of {total} ({100 * with_any / total:.1f} %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
