"""Safe YAML loading with duplicate-key rejection, line numbers per path, and ``--set a.b=c`` overrides."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from hwnas.errors import ConfigError

Path_ = tuple[str | int, ...]


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise ConfigError(
                f"{loader.name}:{key_node.start_mark.line + 1}: duplicate key {key!r} "
                f"(first at line {seen[key] + 1})"
            )
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _line_index(node: yaml.Node | None, path: Path_ = (), out: dict[Path_, int] | None = None) -> dict[Path_, int]:
    out = {} if out is None else out
    if node is None:
        return out
    out[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            key = k.value
            out[(*path, key)] = k.start_mark.line + 1
            _line_index(v, (*path, key), out)
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            _line_index(v, (*path, i), out)
    return out


class LoadedYaml:
    """A YAML document with where each path was written.

    Args:
        data: The loaded mapping.
        source: The file name, for messages.
        lines: Path (keys and list indices) to 1-based line number.
    """

    def __init__(self, data: dict[str, Any], source: str, lines: dict[Path_, int]) -> None:
        self.data = data
        self.source = source
        self.lines = lines

    def where(self, path: Sequence[str | int]) -> str:
        """``file:line`` of the deepest written ancestor of ``path``."""
        p = tuple(path)
        while p and p not in self.lines:
            p = p[:-1]
        line = self.lines.get(p)
        return f"{self.source}:{line}" if line else self.source


def format_path(path: Sequence[str | int]) -> str:
    """``evaluators[2].params.epochs`` from ``("evaluators", 2, "params", "epochs")``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def load_yaml(path: str | Path, overrides: Sequence[str] = ()) -> LoadedYaml:
    """Load an experiment file safely, apply ``key.sub=value`` overrides (values parsed as YAML)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    text = path.read_text(encoding="utf-8")
    return loads_yaml(text, str(path), overrides)


def loads_yaml(text: str, source: str = "<string>", overrides: Sequence[str] = ()) -> LoadedYaml:
    """Like :func:`load_yaml` for text already read."""
    try:
        loader = _UniqueKeyLoader(text)
        loader.name = source
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"{source}:{mark.line + 1}" if mark else source
        raise ConfigError(f"{where}: invalid YAML: {exc.problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: an experiment file is a mapping of keys, not a {type(data).__name__}")
    lines = _line_index(node)
    for item in overrides:
        apply_override(data, item)
    return LoadedYaml(data, source, lines)


def apply_override(data: dict[str, Any], item: str) -> None:
    """Set ``a.b.0.c=value`` in ``data`` (list indices as integers; the value parsed as YAML)."""
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. budget.trials=20")
    key, raw = item.split("=", 1)
    parts = [p for p in key.strip().split(".") if p]
    if not parts:
        raise ConfigError(f"--set {item!r}: empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ConfigError(f"--set {item!r}: value is not valid YAML ({exc})") from None
    node: Any = data
    for i, part in enumerate(parts[:-1]):
        nxt = parts[i + 1]
        if isinstance(node, list):
            idx = _index(part, node, item)
            node = node[idx]
        else:
            if part not in node or node[part] is None:
                node[part] = [] if nxt.isdigit() else {}
            node = node[part]
    last = parts[-1]
    if isinstance(node, list):
        node[_index(last, node, item)] = value
    elif isinstance(node, dict):
        node[last] = value
    else:
        raise ConfigError(f"--set {item!r}: {'.'.join(parts[:-1])} is not a mapping or list")


def _index(part: str, node: list[Any], item: str) -> int:
    if not part.lstrip("-").isdigit():
        raise ConfigError(f"--set {item!r}: {part!r} must be a list index")
    idx = int(part)
    if not -len(node) <= idx < len(node):
        raise ConfigError(f"--set {item!r}: index {idx} is out of range (the list has {len(node)} items)")
    return idx


def dump_yaml(data: Any) -> str:
    """YAML text in the file order of ``data``'s keys."""
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)
