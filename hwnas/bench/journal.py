"""What a bench has measured so far, kept beside its output: an interrupted bench loses at most the piece it was
running, and ``--resume`` goes on from the rest (``nas bench strategies`` and ``nas bench predictors``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from hwnas.errors import ConfigError

#: The bench's results so far, beside where ``results.json`` will go: rewritten after every finished piece (a
#: strategy of a section; a training size of a dataset), removed once ``results.json`` is written.
PARTIAL = "results.partial.json"


class BenchSettings(Protocol):
    """A bench's configuration: every option that decides its figures, as JSON-safe values."""

    def to_dict(self) -> Mapping[str, object]:
        """The options, as written into the results' ``config``."""
        ...


class BenchJournal:
    """What a bench has measured so far (:data:`PARTIAL` in its output folder, written atomically after every
    finished piece), and what an interrupted bench of the same configuration left there to reuse.

    Every figure of a bench is a function of its configuration and the seed, so a resumed bench's results equal an
    uninterrupted one's (timings aside).
    """

    def __init__(self, path: Path, *, prior: Mapping[str, Any] | None = None) -> None:
        self.path = path
        self.prior: Mapping[str, Any] = prior or {}
        self.results: dict[str, Any] | None = None  # the dict the bench fills, set by the bench
        self.reused = 0  # pieces taken from the interrupted bench

    @classmethod
    def resume(cls, path: Path, cfg: BenchSettings) -> BenchJournal:
        """The journal of an interrupted bench in ``path`` (:class:`ConfigError` when there is none, or when it was
        run with other options: every differing one is named)."""
        if not path.is_file():
            finished = path.with_name("results.json")
            why = (f"the bench in {path.parent} finished ({finished.name}); nothing to resume"
                   if finished.is_file() else f"no interrupted bench in {path.parent} (no {path.name})")
            raise ConfigError(f"--resume: {why}")
        try:
            prior = json.loads(path.read_text(encoding="utf-8"))
            before = prior["config"]
            if not isinstance(before, dict):
                raise TypeError("config is not a mapping")
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"--resume: {path} is not a bench's partial results ({type(exc).__name__}); start "
                              "afresh with --force") from None
        now = json.loads(json.dumps(cfg.to_dict()))
        changed = [k for k in sorted(set(before) | set(now)) if before.get(k) != now.get(k)]
        if changed:
            said = "; ".join(f"{k}: {before.get(k)!r} then, {now.get(k)!r} now" for k in changed)
            raise ConfigError(f"--resume: the interrupted bench in {path.parent} was run with other options ({said}); "
                              "resume it with the same options, or start afresh with --force")
        return cls(path, prior=prior)

    def entry(self, where: Sequence[str]) -> Mapping[str, Any]:
        """The interrupted bench's entry at ``where`` (keys from the results' top), or an empty one."""
        node: Any = self.prior
        for key in where:
            node = node.get(key, {}) if isinstance(node, Mapping) else {}
        return node if isinstance(node, Mapping) else {}

    def reuse(self, where: Sequence[str], name: str, into: dict[str, Any],
              keys: Sequence[str] = ("runs", "summary", "curve", "not_run")) -> bool:
        """Copy strategy ``name``'s records at ``where`` from the interrupted bench into ``into``; False when it
        had not finished them."""
        before = self.entry(where)
        if name not in before.get(keys[0], {}):
            return False
        for key in keys:
            if name in before.get(key, {}):
                into.setdefault(key, {})[name] = before[key][name]
        self.reused += 1
        return True

    def save(self) -> None:
        """Write the results so far (atomically: a kill leaves the previous or the new file whole)."""
        from hwnas.fileio import atomic_write

        if self.results is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, json.dumps(self.results, indent=1) + "\n")
