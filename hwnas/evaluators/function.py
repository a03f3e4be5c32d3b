"""``function``: score architectures with a Python function of one's own (define-by-run scoring).

.. code-block:: yaml

    evaluators:
      - name: function
        params: {callable: "mypkg.scores:latency_on_my_npu", provides: [npu_ms], cheap: true}

or, from Python, the function itself: ``{"name": "function", "params": {"callable": latency_on_my_npu,
"provides": ["npu_ms"]}}`` (recorded in config.yaml by its import path, ``module:qualname``).

The function takes the :class:`~hwnas.architecture.Architecture` and returns metric -> number for it. It may ask
for more by naming them as parameters: ``module`` (the architecture built as a seeded ``torch.nn.Module``, in
eval mode), ``space`` (the search space), ``input_shape`` (the module's input, without the batch axis); and
``kwargs`` of the evaluator's params are passed as keyword arguments too.

It is rebuilt from its import path wherever it runs: in the driver, in the ``process`` executor's workers and in
Ray actors, so it must be importable there (a module-level function of an installed or importable module; a
function of a notebook or a script, ``__main__:fn``, runs with the ``local`` executor only). A lambda or a nested
function is refused when the experiment is built, as is a path that does not import or names something that is
not callable. What it returns is checked as every evaluator's result is: not a mapping of metric -> number, a
value that is not a finite number, a declared metric left out, or an exception fails that trial alone, with the
message naming the evaluator.

The fingerprint (what makes a journaled result reusable on resume) covers the import path, ``provides``,
``kwargs``, ``version`` and the function's compiled code: an edited function does not silently reuse the
results of the old one (a resume is refused; start a new run, or keep the old code).
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import re
import types
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import Field, field_validator

from hwnas.architecture import Architecture
from hwnas.evaluation import EvalContext, EvaluatorParams, Metrics, stable_fingerprint

_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
#: The parameters a function may ask for by name, beside the architecture.
EXTRAS = ("module", "space", "input_shape")


def resolve(path: str) -> Callable[..., Any]:
    """The callable at ``module:qualname``.

    Raises:
        ValueError: Not of that form, the module does not import, the name is missing or not callable.
    """
    if not _PATH.fullmatch(path):
        raise ValueError(f"{path!r}: expected 'module:function' (e.g. 'mypkg.scores:latency_on_my_npu')")
    module_name, qualname = path.split(":", 1)
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"{path!r}: cannot import {module_name!r} ({exc})") from None
    for part in qualname.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{path!r}: {module_name!r} has no {qualname!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"{path!r}: is a {type(obj).__name__}, not a function")
    return obj


def import_path(fn: Callable[..., Any]) -> str:
    """``module:qualname`` of a function given in code, checked to lead back to it.

    Raises:
        ValueError: A lambda, a nested function, or one its path does not import back.
    """
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not module or not qualname or "<" in qualname:
        raise ValueError(f"{fn!r} cannot be rebuilt by import path (a lambda, or a function defined inside "
                         "another): define it at module level")
    path = f"{module}:{qualname}"
    if resolve(path) is not fn:
        raise ValueError(f"{path!r} does not lead back to {fn!r}: define the function at module level")
    return path


def code_hash(fn: Callable[..., Any]) -> str:
    """A hash of the function's compiled code (bytecode, constants and names, nested code included; for a
    callable object, its ``__call__``); empty where there is none to read."""
    target = getattr(fn, "__func__", fn)
    code = getattr(target, "__code__", None)
    if code is None:
        code = getattr(type(fn).__dict__.get("__call__"), "__code__", None)
    if code is None:
        return ""
    digest = hashlib.sha256()

    def feed(c: types.CodeType) -> None:
        digest.update(c.co_code)
        digest.update(repr(c.co_names).encode())
        for const in c.co_consts:
            if isinstance(const, types.CodeType):
                feed(const)
            else:
                digest.update(repr(const).encode())

    feed(code)
    return digest.hexdigest()[:16]


class FunctionParams(EvaluatorParams):
    callable: str = Field(description="the function, 'module:qualname' (or the function itself, from Python)")
    provides: tuple[str, ...] = Field(min_length=1, description="the metrics it returns")
    cheap: bool = Field(True, description="runs in the driver before the constraints (false: sent to the executor)")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="keyword arguments passed to every call")
    version: str = Field("", description="part of the fingerprint: change it when what the function reads changes")

    @field_validator("callable", mode="before")
    @classmethod
    def _path(cls, value: Any) -> Any:
        if callable(value):
            return import_path(value)
        if isinstance(value, str):
            resolve(value)
        return value

    @field_validator("provides")
    @classmethod
    def _names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        empty = [m for m in value if not m.strip()]
        if empty or len(set(value)) != len(value):
            raise ValueError("metric names must be non-empty and distinct")
        return value

    @field_validator("kwargs")
    @classmethod
    def _not_reserved(cls, value: dict[str, Any]) -> dict[str, Any]:
        taken = sorted(set(value) & {"arch", *EXTRAS})
        if taken:
            raise ValueError(f"{', '.join(taken)}: reserved (passed by the evaluator)")
        return value


class FunctionEvaluator:
    """Scores each architecture with a Python function (see the module's docstring)."""

    Params = FunctionParams

    def __init__(self, *, context: EvalContext, callable: str, provides: Sequence[str], cheap: bool = True,
                 kwargs: dict[str, Any] | None = None, version: str = "") -> None:
        self.path = callable
        self.fn = resolve(callable)
        self.provides = tuple(provides)
        self.cheap = bool(cheap)
        self.kwargs = dict(kwargs or {})
        self.version = version
        self.space = context.space
        self.seed = context.seed
        try:
            names = set(inspect.signature(self.fn).parameters)
        except (TypeError, ValueError):  # a builtin without a signature: the architecture alone
            names = set()
        self.wants = tuple(n for n in EXTRAS if n in names)
        self._fingerprint = stable_fingerprint("function", {
            "callable": self.path, "provides": list(self.provides), "kwargs": self.kwargs, "version": version,
            "code": code_hash(self.fn), **({"seed": self.seed} if "module" in self.wants else {})})

    def fingerprint(self) -> str:
        return self._fingerprint

    def evaluate(self, archs: Sequence[Architecture]) -> list[Metrics | BaseException]:
        """The function's answer per architecture, as it returned it (the runner checks it is metric -> number
        with every declared metric), or the exception it raised."""
        out: list[Any] = []
        for arch in archs:
            try:
                out.append(self.fn(arch, **self._extras(arch), **self.kwargs))
            except Exception as exc:  # reported per architecture
                out.append(exc)
        return out

    def _extras(self, arch: Architecture) -> dict[str, Any]:
        extras: dict[str, Any] = {}
        if "space" in self.wants:
            extras["space"] = self.space
        if "input_shape" in self.wants:
            extras["input_shape"] = tuple(self.space.input_shape_of(arch))
        if "module" in self.wants:
            from hwnas.training import build_seeded

            extras["module"] = build_seeded(self.space, arch, self.seed).eval()
        return extras
