"""Errors hwnas raises on purpose: each names the problem and where it is."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import BaseModel
    from pydantic_core import ErrorDetails


class HwnasError(Exception):
    """Base class of every error hwnas raises on purpose (the CLI prints these as one line)."""


class ConfigError(HwnasError):
    """An experiment file or a component's parameters are wrong.

    Args:
        problems: One message per problem, each starting with its location.
    """

    def __init__(self, problems: str | Sequence[str]) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        if len(self.problems) == 1:
            text = self.problems[0]
        else:
            text = f"{len(self.problems)} problems:\n" + "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(text)


class UnknownComponent(ConfigError):
    """A registry has no component of the requested name."""


def pydantic_message(error: Mapping[str, object]) -> str:
    """The message of one of pydantic's error dicts; a validator's own sentence without pydantic's
    ``Value error, `` prefix."""
    msg = str(error.get("msg", ""))
    return msg.removeprefix("Value error, ") if error.get("type") == "value_error" else msg


class InvalidParams(ConfigError):
    """A component's parameters do not validate.

    Args:
        kind: The registry kind (``"search space"``, ``"evaluator"``...).
        name: The component's registered name.
        errors: pydantic's error dicts (``loc``, ``msg``, ``type``), for callers that point at file lines.
        model: The ``Params`` model that refused them.
    """

    def __init__(self, kind: str, name: str, errors: Sequence[ErrorDetails], *, model: type[BaseModel] | None = None
                 ) -> None:
        self.kind, self.name, self.errors, self.model = kind, name, list(errors), model
        super().__init__([
            f"{kind} {name!r}: params.{'.'.join(str(p) for p in e.get('loc', ()))}: {pydantic_message(e)}"
            for e in self.errors
        ])


class InvalidArchitecture(HwnasError):
    """An architecture is not a member of its search space (names the offending gene)."""


class MissingLatencyEntry(HwnasError):
    """A latency table has no entry for some layer keys (never priced as 0)."""

    def __init__(self, keys: Sequence[str], table: str = "") -> None:
        self.keys = list(keys)
        shown = ", ".join(self.keys[:5]) + (f" (+{len(self.keys) - 5} more)" if len(self.keys) > 5 else "")
        where = f" in {table}" if table else ""
        super().__init__(f"no latency entry{where} for {len(self.keys)} key(s): {shown}")


class OutputExists(HwnasError, FileExistsError):
    """A write would replace an existing file (or a file is expected where a directory is) without ``--force``."""


class JournalError(HwnasError):
    """A run's journal (trials.jsonl) cannot be read back."""


class RunDirectoryError(HwnasError):
    """A run directory cannot be used as asked (it exists, or its config differs)."""


class EvaluationError(HwnasError):
    """One evaluation failed for one architecture (the trial is recorded as failed)."""


class TrainingDiverged(EvaluationError):
    """Training produced a non-finite loss."""


class BackendUnavailable(HwnasError):
    """An optional backend (onnxruntime provider, TensorRT, Ray) is not installed here."""
