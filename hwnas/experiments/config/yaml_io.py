"""Safe YAML loading with duplicate-key rejection, line numbers per path, and ``--set a.b=c`` overrides."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import yaml

from hwnas.errors import ConfigError
from hwnas.fileio import check_input_file
from hwnas.yaml_safe import MAX_BYTES, MAX_DEPTH, MAX_NODES, check_size

__all__ = ["MAX_BYTES", "MAX_DEPTH", "MAX_NODES", "LoadedYaml", "apply_override", "dump_yaml", "format_path",
           "load_yaml", "loads_yaml"]

Path_ = tuple[str | int, ...]


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, object]:
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
            key_path = (*path, k.value)
            out[key_path] = k.start_mark.line + 1
            _line_index(v, key_path, out)
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

    def __init__(self, data: dict[str, Any], source: str, lines: dict[Path_, int],
                 set_by: dict[Path_, str] | None = None) -> None:
        self.data = data
        self.source = source
        self.lines = lines
        self.set_by = dict(set_by or {})

    def where(self, path: Sequence[str | int]) -> str:
        """Where the value at ``path`` came from: ``--set KEY=VALUE`` when an override wrote it (or an
        ancestor of it), else ``file:line`` of its deepest written ancestor (``... with --set KEY=VALUE``
        when overrides changed something inside it, or renamed the component it belongs to)."""
        p = tuple(path)
        q = p
        while q:
            if q in self.set_by:
                return f"--set {self.set_by[q]}"
            q = q[:-1]
        inside = [item for q, item in self.set_by.items() if q[:len(p)] == p]  # overrides within this value
        # a component renamed by --set (space.name=nb201) makes the file's params beside it wrong: say so
        inside += [item for q, item in self.set_by.items()
                   if q[-1:] == ("name",) and len(p) >= len(q) and p[:len(q) - 1] == q[:-1] and item not in inside]
        while p and p not in self.lines:
            p = p[:-1]
        line = self.lines.get(p)
        at = f"{self.source}:{line}" if line else self.source
        return f"{at} with --set {', --set '.join(inside)}" if inside else at


def format_path(path: Sequence[str | int]) -> str:
    """``evaluators[2].params.epochs`` from ``("evaluators", 2, "params", "epochs")``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def load_yaml(path: str | Path, overrides: Sequence[str] = ()) -> LoadedYaml:
    """Load an experiment file safely, apply ``key.sub=value`` overrides (values parsed as YAML).

    Raises:
        ConfigError: One line naming the file and the problem: missing, a directory, not UTF-8 text,
            binary (NUL bytes), too large, empty, invalid YAML, aliases that expand past
            :data:`hwnas.yaml_safe.MAX_NODES` values, nesting deeper than :data:`hwnas.yaml_safe.MAX_DEPTH`.
    """
    path = check_input_file(path, "a YAML file")  # a pipe, a device or a folder: refused, never read
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise ConfigError(f"{path}: {size:,} bytes is too large for an experiment file (at most {MAX_BYTES:,})")
    raw = path.read_bytes()
    if b"\0" in raw:
        raise ConfigError(f"{path}: is a binary file (it contains NUL bytes), not a YAML experiment file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: is not UTF-8 text (byte {exc.start}: {raw[exc.start:exc.start + 1]!r})") from None
    return loads_yaml(text, str(path), overrides)


def loads_yaml(text: str, source: str = "<string>", overrides: Sequence[str] = ()) -> LoadedYaml:
    """Like :func:`load_yaml` for text already read."""
    try:
        loader = _UniqueKeyLoader(text)
        loader.name = source
        try:
            node = loader.get_single_node()
            if node is not None:
                check_size(node, source)
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"{source}:{mark.line + 1}" if mark else source
        raise ConfigError(f"{where}: invalid YAML: {exc.problem}") from None
    except yaml.YAMLError as exc:  # e.g. a reader error: characters YAML does not allow
        raise ConfigError(f"{source}: invalid YAML: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise ConfigError(f"{source}: nested too deeply to be an experiment file") from None
    if data is None:
        raise ConfigError(f"{source}: is empty (no keys; see experiments/quickstart.yaml for a complete file)")
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: an experiment file is a mapping of keys, not a {type(data).__name__}")
    lines = _line_index(node)
    set_by: dict[Path_, str] = {}
    for item in overrides:
        set_by[apply_override(data, item)] = item
    return LoadedYaml(data, source, lines, set_by)


def apply_override(data: dict[str, object], item: str) -> Path_:
    """Set ``a.b.0.c=value`` in ``data`` (list indices as integers; the value parsed as YAML); returns the path."""
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. budget.trials=20")
    key, raw = item.split("=", 1)
    parts = [p for p in key.strip().split(".") if p]
    if not parts:
        raise ConfigError(f"--set {item!r}: empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"--set {item!r}: value is not valid YAML ({problem})") from None
    node: Any = data
    where: list[str | int] = []
    for i, part in enumerate(parts[:-1]):
        nxt = parts[i + 1]
        if isinstance(node, list):
            idx = _index(part, node, item)
            where.append(idx % len(node))
            node = node[idx]
        else:
            if part not in node or node[part] is None:
                node[part] = [] if nxt.isdigit() else {}
            where.append(part)
            node = node[part]
    last = parts[-1]
    if isinstance(node, list):
        idx = _index(last, node, item)
        node[idx] = value
        where.append(idx % len(node))
    elif isinstance(node, dict):
        node[last] = value
        where.append(last)
    else:
        raise ConfigError(f"--set {item!r}: {'.'.join(parts[:-1])} is not a mapping or list")
    return tuple(where)


def _index(part: str, node: list[object], item: str) -> int:
    if not part.lstrip("-").isdigit():
        raise ConfigError(f"--set {item!r}: {part!r} must be a list index")
    idx = int(part)
    if not -len(node) <= idx < len(node):
        raise ConfigError(f"--set {item!r}: index {idx} is out of range (the list has {len(node)} items)")
    return idx


def dump_yaml(data: object) -> str:
    """YAML text in the file order of ``data``'s keys."""
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)
