"""Bounded safe YAML: what every YAML file hwnas reads (experiments, published latency tables) goes through.

``yaml.safe_load`` builds no objects it should not, but aliases let a few hundred bytes stand for a tree of
billions of values (the "billion laughs"): PyYAML shares the nodes, and whatever walks the result (validation,
``json.dumps``, a copy) expands them. :func:`check_size` counts the expanded tree over the shared node graph
without expanding it, and refuses documents past :data:`MAX_NODES` values or :data:`MAX_DEPTH` levels.
"""

from __future__ import annotations

from typing import Any

import yaml

from hwnas.errors import ConfigError

#: At most this many values in the expanded document, this many levels of nesting, this many bytes of text.
MAX_NODES = 100_000
MAX_DEPTH = 64
MAX_BYTES = 10 * 2**20


def check_size(node: yaml.Node, source: str, *, max_nodes: int = MAX_NODES) -> None:
    """Refuse a composed node graph whose expanded tree exceeds the bounds (counted once per shared node)."""
    sizes: dict[int, int] = {}

    def size(n: yaml.Node, depth: int) -> int:
        if depth > MAX_DEPTH:
            raise ConfigError(f"{source}:{n.start_mark.line + 1}: nested deeper than {MAX_DEPTH} levels")
        known = sizes.get(id(n))
        if known is not None:
            return known
        total = 1
        if isinstance(n, yaml.MappingNode):
            total += sum(size(k, depth + 1) + size(v, depth + 1) for k, v in n.value)
        elif isinstance(n, yaml.SequenceNode):
            total += sum(size(v, depth + 1) for v in n.value)
        if total > max_nodes:
            raise ConfigError(f"{source}:{n.start_mark.line + 1}: aliases expand this document past {max_nodes:,} "
                              "values; refusing it (an alias bomb?)")
        sizes[id(n)] = total
        return total

    size(node, 0)


def safe_load_bounded(text: str, source: str, *, max_nodes: int = MAX_NODES) -> Any:
    """``yaml.safe_load`` of ``text`` after :func:`check_size` (``yaml.YAMLError`` propagates for bad syntax)."""
    if len(text) > MAX_BYTES:
        raise ConfigError(f"{source}: {len(text):,} characters is too large a YAML document (at most {MAX_BYTES:,})")
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        check_size(node, source, max_nodes=max_nodes)
        return loader.construct_document(node)
    except RecursionError:
        raise ConfigError(f"{source}: nested too deeply") from None
    finally:
        loader.dispose()
