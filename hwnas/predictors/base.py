"""The Predictor protocol: sklearn-shaped accuracy (or any metric) predictors over encoded architectures.

A predictor learns ``y`` (one metric value per architecture) from ``X`` (one row per architecture,
``space.encode(arch)``). It saves itself as JSON or safetensors, never pickle, so a saved predictor
is data another process or version can read, not code it must trust.

Registered predictors are built as ``PREDICTORS.create(name, params, rng=generator)``: keyword-only
constructors that receive their validated ``Params`` and a seeded ``np.random.Generator`` (a
predictor that draws nothing ignores it). Only numpy is imported here.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, TypedDict, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from hwnas.registry import Registry

if TYPE_CHECKING:
    from typing_extensions import Self

#: The built-in predictors, each imported when its name is first looked up (plug-ins come from entry points).
BUILTIN_PREDICTORS: dict[str, str] = {
    "ensemble": "hwnas.predictors.ensemble:EnsemblePredictor",
    "gbt": "hwnas.predictors.gbt:GBTPredictor",
    "gin": "hwnas.predictors.gin:GINPredictor",
    "gp": "hwnas.predictors.gp:GPPredictor",
    "linear": "hwnas.predictors.linear:LinearPredictor",
    "mlp": "hwnas.predictors.mlp:MLPPredictor",
}
PREDICTORS: Registry[Predictor] = Registry(kind="predictor", entry_point_group="hwnas.predictors",
                                           builtins=BUILTIN_PREDICTORS)


@runtime_checkable
class Predictor(Protocol):
    """Learns a metric from encoded architectures (``X``: architectures x features, ``y``: one value each).

    Fitting is deterministic given the generator the predictor was built with; a fitted predictor
    refuses ``X`` whose width differs from the one it was fitted on, with a ``ValueError`` that
    names the expected width.

    The members under ``TYPE_CHECKING`` are what hwnas's own tools use of a registered predictor (its ``Params``
    values, the ``meta`` that ``nas predictor fit`` attaches, the JSON form that :func:`load_predictor` and an
    ensemble read back by kind: :class:`JSONPredictor` has them all); ``isinstance`` does not look for them.
    """

    if TYPE_CHECKING:
        name: ClassVar[str]
        meta: dict[str, Any]

        @property
        def params(self) -> BaseModel:
            """The validated ``Params`` the predictor was built with."""
            ...

        @property
        def n_features(self) -> int | None:
            """The width of ``X`` it was fitted on (None before fitting)."""
            ...

        def to_dict(self) -> dict[str, object]:
            """The fitted predictor as JSON-safe data (:meth:`JSONPredictor.to_dict`)."""
            ...

        @classmethod
        def from_dict(cls, data: object, *, source: str = ...) -> Self:
            """A predictor from :meth:`to_dict`'s data."""
            ...

    def fit(self, X: np.ndarray, y: np.ndarray) -> Self:
        """Fit on ``X`` (2-D) and ``y`` (1-D, same length); returns the predictor itself."""
        ...

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Predicted values, a finite 1-D array with one entry per row of ``X``."""
        ...

    def save(self, path: str | Path) -> None:
        """Write the fitted predictor to one file at ``path``: JSON or safetensors, never pickle."""
        ...

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """A predictor read back from :meth:`save`'s file; it predicts exactly as the saved one did."""
        ...


@runtime_checkable
class StdPredictor(Protocol):
    """Says how sure it is: :class:`UncertainPredictor` without the :class:`Predictor` members (what a strategy
    checks a registered predictor class for)."""

    def predict_std(self, X: np.ndarray) -> np.ndarray:
        """Predictive standard deviation, one entry per row of ``X``."""
        ...


@runtime_checkable
class UncertainPredictor(Predictor, StdPredictor, Protocol):
    """A predictor that also says how sure it is (ensembles, Gaussian processes, Bayesian linear models)."""

    def predict_std(self, X: np.ndarray) -> np.ndarray:
        """Predictive standard deviation, a finite non-negative 1-D array with one entry per row of ``X``."""
        ...


class PredictorParams(BaseModel):
    """Parameters common to every predictor; subclasses add their own."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class RankTargetParams(PredictorParams):
    """Parameters of a predictor that can fit the targets' quantiles (see :class:`RankTarget`)."""

    target: Literal["rank", "raw"] = Field(
        "rank", description="rank: fit the targets' quantiles and map back (robust to a long tail); raw: the values")


def as_feature_matrix(X: object, *, n_features: int | None = None, owner: str = "predictor") -> np.ndarray:
    """``X`` as a finite 2-D float array of the expected width, or one ValueError that says what is wrong.

    Args:
        X: Encoded architectures, one row each.
        n_features: The width the predictor was fitted on (None before fitting).
        owner: Who is asking, for the message.
    """
    try:
        arr = np.asarray(X, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{owner}: X must be numeric: {exc}") from None
    if arr.ndim != 2:
        raise ValueError(f"{owner}: X must be 2-D (architectures x features), got shape {arr.shape}")
    if n_features is not None and arr.shape[1] != n_features:
        raise ValueError(f"{owner}: expected {n_features} features per row (the fitted width), got {arr.shape[1]}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{owner}: X contains NaN or inf")
    return arr


def as_target_vector(y: object, *, n_rows: int, owner: str = "predictor") -> np.ndarray:
    """``y`` as a finite 1-D float array with ``n_rows`` entries, or one ValueError.

    Args:
        y: One target value per architecture.
        n_rows: Number of rows of the matching ``X``.
        owner: Who is asking, for the message.
    """
    arr = np.asarray(y, dtype=float)
    if arr.ndim != 1 or arr.shape[0] != n_rows:
        raise ValueError(f"{owner}: y must be 1-D with one value per row of X ({n_rows}), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{owner}: y contains NaN or inf")
    return arr


# --------------------------------------------------------------------------------------------
# what the shipped predictors share: input checks at fit time, and one JSON file format

#: Format version of a saved predictor; a file of another version is refused by name.
FORMAT_VERSION = 1
FORMAT_NAME = "hwnas-predictor"


def check_fit_data(X: object, y: object, *, owner: str, min_samples: int) -> tuple[np.ndarray, np.ndarray]:
    """``X`` and ``y`` checked for fitting: numeric, finite, matching, enough rows, targets that vary.

    Raises:
        ValueError: One message naming the problem (and, for too few rows, how many are needed).
    """
    X = as_feature_matrix(X, owner=owner)
    y = as_target_vector(y, n_rows=X.shape[0], owner=owner)
    if X.shape[0] < min_samples:
        raise ValueError(f"{owner}: {X.shape[0]} architecture(s) to fit on; it needs at least {min_samples}")
    if np.ptp(y) == 0:
        raise ValueError(f"{owner}: every target is {y[0]:g}; a constant cannot rank architectures "
                         "(check the metric and the journal)")
    return X, y


class PackedArray(TypedDict):
    """An array as :func:`pack_array` writes it: dtype (little-endian), shape and the bytes in base64."""

    dtype: str
    shape: list[int]
    data: str


def pack_array(a: np.ndarray) -> PackedArray:
    """An array as JSON-safe data: dtype, shape and the little-endian bytes in base64 (exact, compact)."""
    import base64

    arr = np.ascontiguousarray(a)
    dtype = arr.dtype.newbyteorder("<")
    return {"dtype": dtype.str, "shape": list(arr.shape),
            "data": base64.b64encode(arr.astype(dtype, copy=False).tobytes()).decode("ascii")}


def unpack_array(d: Any, *, what: str = "array") -> np.ndarray:
    """Inverse of :func:`pack_array`; a ValueError names a malformed entry."""
    import base64
    import binascii

    try:
        dtype = np.dtype(d["dtype"])
        if dtype.kind not in "fiub":
            raise ValueError(f"dtype {dtype} is not numeric")
        shape = tuple(int(s) for s in d["shape"])
        raw = base64.b64decode(d["data"], validate=True)
        arr = np.frombuffer(raw, dtype=dtype).reshape(shape)
    except (KeyError, TypeError, ValueError, binascii.Error) as exc:
        raise ValueError(f"malformed {what} in predictor file: {exc}") from None
    return arr.astype(dtype.newbyteorder("="))


class JSONPredictor:
    """Save/load for the shipped predictors: one JSON file, ``{"format", "version", "predictor", "params",
    "state", "meta"}``. Subclasses give ``name``, ``Params`` and ``_state`` / ``_from_state``.

    ``meta`` is free JSON the caller attaches (``nas predictor fit`` records the space, the feature set
    and width, the target metric and the validation figures); it travels with the file.
    """

    name: ClassVar[str] = ""
    Params: type[PredictorParams] = PredictorParams

    def __init__(self, *, rng: np.random.Generator | None = None, **params: object) -> None:
        self.params = self.Params(**params)
        #: The seed of everything the fit draws, taken from the generator the predictor is built with.
        self.seed = int((rng if rng is not None else np.random.default_rng(0)).integers(2**31 - 1))
        self.meta: dict[str, Any] = {}
        self.n_features: int | None = None
        self._rank: RankTarget | None = None  # set by _fit_targets when params.target is "rank"

    def _fit_targets(self, y: np.ndarray) -> np.ndarray:
        """What the model is fitted on: ``y``, or its quantiles with ``target: rank`` (remembered for the way back)."""
        self._rank = RankTarget() if getattr(self.params, "target", "raw") == "rank" else None
        return y if self._rank is None else self._rank.fit(y)

    def _to_target_units(self, pred: np.ndarray) -> np.ndarray:
        """The model's output in the targets' units (inverse of :meth:`_fit_targets`)."""
        return pred if self._rank is None else self._rank.inverse(pred)

    def _std_to_target_units(self, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
        """A spread of the model's output at ``mean`` in the targets' units: with ``target: rank``, the delta method
        (the quantile spread times the slope of the map back, by central difference); else ``std`` itself."""
        std = np.maximum(np.asarray(std, dtype=float), 0.0)
        if self._rank is None:
            return std
        h = 1e-3
        slope = (self._rank.inverse(mean + h) - self._rank.inverse(mean - h)) / (2 * h)
        out: np.ndarray = std * np.abs(slope)
        return out

    def _state(self) -> dict[str, object]:
        raise NotImplementedError

    def _from_state(self, state: dict[str, Any]) -> None:
        raise NotImplementedError

    def _require_fitted(self) -> int:
        if self.n_features is None:
            raise RuntimeError(f"{self.name}: predict() before fit()")
        return self.n_features

    def to_dict(self) -> dict[str, object]:
        """The fitted predictor as JSON-safe data."""
        self._require_fitted()
        return {"format": FORMAT_NAME, "version": FORMAT_VERSION, "predictor": self.name,
                "params": self.params.model_dump(mode="json"), "n_features": self.n_features,
                "state": self._state(), "rank": None if self._rank is None else self._rank.state(),
                "meta": self.meta}

    @classmethod
    def from_dict(cls, data: object, *, source: str = "predictor data") -> Self:
        """A predictor from :meth:`to_dict`'s data; a ValueError names what does not fit this class."""
        if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
            raise ValueError(f"{source} is not an hwnas predictor file")
        if data.get("version") != FORMAT_VERSION:
            raise ValueError(f"{source} has predictor format version {data.get('version')!r}; this hwnas reads "
                             f"version {FORMAT_VERSION}: refit it with this version")
        if data.get("predictor") != cls.name:
            raise ValueError(f"{source} holds a {data.get('predictor')!r} predictor, not {cls.name!r}")
        try:
            obj = cls(rng=np.random.default_rng(0), **data["params"])
            obj.n_features = int(data["n_features"])
            obj.meta = dict(data.get("meta") or {})
            if getattr(obj.params, "target", "raw") == "rank":
                obj._rank = RankTarget.from_state(data["rank"])
            obj._from_state(data["state"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{source}: malformed {cls.name} predictor: {exc}") from None
        return obj

    def save(self, path: str | Path) -> None:
        """Write the fitted predictor as one JSON file (atomically)."""
        import json

        from hwnas.fileio import atomic_write

        atomic_write(path, json.dumps(self.to_dict(), allow_nan=False))

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Read a file written by :meth:`save` of this class."""
        return cls.from_dict(_read_json(path), source=str(path))


def _read_json(path: str | Path) -> Any:
    import json

    from hwnas.errors import ConfigError
    from hwnas.fileio import read_input_bytes

    if not Path(path).exists():
        raise FileNotFoundError(f"predictor file {path} does not exist")
    try:
        data = read_input_bytes(path, "a predictor file (JSON)")  # a pipe, a device, a folder: refused, never read
    except ConfigError as exc:  # the callers' contract: ValueError for a file that is not a predictor's
        raise ValueError(str(exc)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"predictor file {path} is not JSON (binary content; pickles are never read)") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"predictor file {path} is not JSON: {exc}") from None


def load_predictor(path: str | Path) -> Predictor:
    """Any registered predictor from its saved file (the file names its kind)."""
    data = _read_json(path)
    if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
        raise ValueError(f"{path} is not an hwnas predictor file")
    name = data.get("predictor")
    if not isinstance(name, str) or name not in PREDICTORS:
        raise ValueError(f"{path} holds predictor kind {name!r}, which this hwnas does not have "
                         f"(known: {', '.join(PREDICTORS.names())})")
    return PREDICTORS.get(name).from_dict(data, source=str(path))


class RankTarget:
    """The ``target: rank`` transform: fit on the targets' quantiles, map predictions back through them.

    A model fitted on ``(rank - 0.5) / n`` is not pulled about by a long tail of the targets (NAS-Bench-201's
    untrainable cells at 10 %); the prediction goes back to the target's units by interpolating the sorted
    training targets, extended linearly past both ends so that no two distinct predictions become equal.
    The map is increasing, so the model's ranking is kept exactly.
    """

    def __init__(self) -> None:
        self.u = np.zeros(0)
        self.y = np.zeros(0)

    def fit(self, y: np.ndarray) -> np.ndarray:
        """Store the sorted targets; return the quantile of each target (ties share their mean rank)."""
        from scipy.stats import rankdata

        n = y.size
        u = (rankdata(y) - 0.5) / n
        order = np.argsort(u, kind="stable")
        self.u, self.y = u[order], y[order]
        quantiles: np.ndarray = u
        return quantiles

    def inverse(self, u_hat: np.ndarray) -> np.ndarray:
        """Quantiles back to target units: increasing, linear beyond the training range."""
        u, y = self.u, self.y
        out: np.ndarray = np.interp(u_hat, u, y)
        span_u, span_y = u[-1] - u[0], y[-1] - y[0]
        slope = span_y / span_u if span_u > 0 and span_y > 0 else 1.0
        lo, hi = u_hat < u[0], u_hat > u[-1]
        out[lo] = y[0] + (u_hat[lo] - u[0]) * slope
        out[hi] = y[-1] + (u_hat[hi] - u[-1]) * slope
        return out

    def state(self) -> dict[str, PackedArray]:
        return {"u": pack_array(self.u), "y": pack_array(self.y)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> RankTarget:
        out = cls()
        out.u = unpack_array(state["u"], what="rank-target quantiles").astype(float)
        out.y = unpack_array(state["y"], what="rank-target values").astype(float)
        if out.u.ndim != 1 or out.u.shape != out.y.shape or out.u.size < 2 or np.any(np.diff(out.u) < 0):
            raise ValueError("rank-target arrays are not two increasing 1-D arrays of one length")
        return out
