"""Callbacks of a run: the user's code, called by the runner after every finished trial and every batch.

A callback is either a plain callable, called with ``(run, trial)`` after each trial evaluated in this session
(as Optuna calls ``callback(study, trial)``), or an object with any of these methods:

- ``on_start(run)``: before the first batch (the journal not replayed yet);
- ``on_trial(run, trial)``: after each trial evaluated in this session, as soon as it is written to the journal
  (trials a resumed run takes from its journal are not announced again);
- ``on_batch(run, trials)``: after each batch that brought new trials, once the strategy was told of it, with
  the batch's new trials in trial order;
- ``on_end(run, result)``: after the search (not after a callback raised), with the run's outcome;
- ``on_error(run, error)``: the search stopped on an error (a callback that raised, Ctrl-C, an evaluator's
  failure streak); what ``on_error`` itself raises is logged, not raised.

``run`` is the handle the callbacks were given to (a :class:`hwnas.experiments.study.Study`), or, for
:func:`hwnas.experiments.api.run_experiment`, the :class:`RunState` of the search. Either has ``stop(reason)``:
the loop stops after the batch in progress (a rule of the user's: "stop when the front has 10 members"), the
run is summarised as usual, and its summary says it stopped early, with the reason.

A callback that raises stops the run at once: every trial finished so far is in the journal (it is closed and
synced on the way out), the error is a :class:`CallbackError` naming the callback, and a resume
(``nas run --resume RUN_DIR``, or ``optimize()`` again) continues from the journal.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from hwnas.errors import HwnasError
from hwnas.objectives import Constraint, Objective, Trial

log = logging.getLogger(__name__)

__all__ = ["CallbackError", "Callbacks", "RunHandle", "RunState", "callback_name"]


class RunHandle(Protocol):
    """What callbacks are given as ``run``: a :class:`RunState` or a :class:`hwnas.experiments.study.Study`."""

    @property
    def run_dir(self) -> Path:
        """The run directory."""

    def stop(self, reason: str = ...) -> None:
        """Stop the search after the batch in progress."""


class CallbackError(HwnasError):
    """A user's callback raised: the run stopped cleanly (the journal holds every finished trial).

    Attributes:
        callback: The callback's name (``module.qualname``).
        run_dir: The run directory, to resume.
    """

    def __init__(self, message: str, *, callback: str, run_dir: Path | None) -> None:
        super().__init__(message)
        self.callback = callback
        self.run_dir = run_dir


def callback_name(cb: object) -> str:
    """``module.qualname`` of a function or of a callback object's class (what an error names)."""
    target = cb if callable(cb) and hasattr(cb, "__qualname__") else type(cb)
    module = getattr(target, "__module__", None) or "?"
    return f"{module}.{getattr(target, '__qualname__', repr(target))}"


@dataclass
class RunState:
    """The search as it stands, for callbacks (the first argument of each call under ``run_experiment``).

    Attributes:
        run_dir: The run directory.
        budget: Distinct architectures the run evaluates.
        objectives: The run's objectives.
        constraints: The run's constraints.
        trials: Every trial of the run so far, the journal's included, in the order they finished.
        evaluated: Trials evaluated in this session.
    """

    run_dir: Path
    budget: int
    objectives: list[Objective]
    constraints: list[Constraint]
    trials: list[Trial] = field(default_factory=list)
    evaluated: int = 0
    stop_requested: str | None = None

    def stop(self, reason: str = "a callback asked to stop") -> None:
        """Stop the search after the batch in progress (the run is then summarised as usual)."""
        self.stop_requested = reason or "a callback asked to stop"


class Callbacks:
    """The callbacks of one search session, as the runner calls them.

    Args:
        callbacks: Plain callables (per trial) or objects with ``on_start`` / ``on_trial`` / ``on_batch`` /
            ``on_end`` (see the module's docstring).
        batch_callbacks: Plain callables called per batch with ``(run, trials)``.
        handle: What callbacks receive as ``run`` (default: the :class:`RunState`, made by :meth:`begin`).
    """

    def __init__(self, callbacks: Sequence[object] = (), *,
                 batch_callbacks: Sequence[Callable[..., object]] = (), handle: RunHandle | None = None) -> None:
        self._start: list[tuple[str, Callable[..., object]]] = []
        self._trial: list[tuple[str, Callable[..., object]]] = []
        self._batch: list[tuple[str, Callable[..., object]]] = []
        self._end: list[tuple[str, Callable[..., object]]] = []
        self._error: list[tuple[str, Callable[..., object]]] = []
        for cb in callbacks:
            methods = [getattr(cb, m, None) for m in ("on_start", "on_trial", "on_batch", "on_end", "on_error")]
            if any(callable(m) for m in methods):
                for bucket, method in zip((self._start, self._trial, self._batch, self._end, self._error), methods):
                    if callable(method):
                        bucket.append((callback_name(cb), method))
            elif callable(cb):
                self._trial.append((callback_name(cb), cb))
            else:
                raise TypeError(f"callback {cb!r} is neither callable nor has on_trial/on_batch/on_start/on_end/"
                                "on_error")
        for cb in batch_callbacks:
            if not callable(cb):
                raise TypeError(f"batch callback {cb!r} is not callable")
            self._batch.append((callback_name(cb), cb))
        self.handle: RunHandle | None = handle
        self.state: RunState | None = None

    @property
    def empty(self) -> bool:
        """No callback at all (the runner then skips the calls)."""
        return not (self._start or self._trial or self._batch or self._end or self._error)

    def begin(self, state: RunState) -> None:
        """A search starts: ``state`` is what it reports into; ``on_start`` callbacks are called."""
        self.state = state
        if self.handle is None:
            self.handle = state
        for name, cb in self._start:
            self._call(name, cb)

    def requested_stop(self) -> str | None:
        """The reason a callback (or the handle's ``stop``) gave to stop, or None."""
        return self.state.stop_requested if self.state is not None else None

    def trial(self, trial: Trial) -> None:
        """A trial was evaluated and journaled."""
        for name, cb in self._trial:
            self._call(name, cb, trial)

    def batch(self, trials: Sequence[Trial]) -> None:
        """A batch with new trials was told to the strategy."""
        if not trials:
            return
        ordered = sorted(trials, key=lambda t: t.number)
        for name, cb in self._batch:
            self._call(name, cb, ordered)

    def end(self, result: object) -> None:
        """The search ended (not after a callback raised)."""
        for name, cb in self._end:
            self._call(name, cb, result)

    def error(self, error: BaseException) -> None:
        """The search stopped on ``error`` (called once a search has begun; never raises)."""
        if self.state is None:
            return
        for name, cb in self._error:
            try:
                cb(self.handle, error)
            except Exception as exc:
                log.warning("callback %s: on_error raised %s: %s", name, type(exc).__name__, exc)

    def _call(self, name: str, cb: Callable[..., object], *args: object) -> None:
        try:
            cb(self.handle, *args)
        except Exception as exc:
            run_dir = self.state.run_dir if self.state is not None else None
            where = f"; resume it with nas run --resume {run_dir} (or optimize() again)" if run_dir else ""
            raise CallbackError(f"callback {name} raised {type(exc).__name__}: {exc}; the run stopped, every "
                                f"trial finished so far is in its journal{where}",
                                callback=name, run_dir=run_dir) from exc
