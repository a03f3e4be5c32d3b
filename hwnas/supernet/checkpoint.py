"""Supernet checkpoints: weights as safetensors, trainer state as a ``weights_only`` torch file, JSON beside them.

A checkpoint is a folder::

    checkpoint/
      supernet.safetensors   the shared weights; its metadata names the space and supernet (name and params)
                             and the dataset section it was trained on
      trainer.pt             optimiser state and the torch generator (read with ``weights_only=True``)
      state.json             phase, epoch, step, the numpy generator's state, the curves so far

It is replaced atomically: a new one is written to a temporary folder, the old one is moved aside, the
new one moved in, the old one deleted; a crash at any point leaves a complete checkpoint (``checkpoint``
or, between the two renames, ``checkpoint.old``), never a torn one. Nothing here is a pickle.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwnas.errors import ConfigError

if TYPE_CHECKING:
    from hwnas.search_spaces.base import SearchSpace
    from hwnas.supernet.base import Supernet

WEIGHTS = "supernet.safetensors"
TRAINER = "trainer.pt"
STATE = "state.json"
META_KEY = "hwnas"


@dataclass(frozen=True)
class SupernetIdentity:
    """Which supernet a set of weights belongs to: the space and the supernet, each by name and parameters."""

    space: str
    space_params: dict[str, Any]
    supernet: str
    supernet_params: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"space": self.space, "space_params": self.space_params, "supernet": self.supernet,
                "supernet_params": self.supernet_params}

    @classmethod
    def from_json(cls, data: Any, where: str) -> SupernetIdentity:
        try:
            return cls(space=str(data["space"]), space_params=dict(data["space_params"]),
                       supernet=str(data["supernet"]), supernet_params=dict(data["supernet_params"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: not an hwnas supernet checkpoint (metadata: {exc})") from None


def identity_of(supernet: Any) -> SupernetIdentity:
    """The identity of a built supernet (its space's resolved parameters included)."""
    from hwnas.supernet.base import SplitIdentity

    space = supernet.space
    params = supernet.identity_params if isinstance(supernet, SplitIdentity) else None  # a few-shot one's split
    return SupernetIdentity(
        space=space.name, space_params=jsonable(space.params.model_dump()), supernet=supernet.registry_name,
        supernet_params=jsonable(params if params is not None else supernet.params.model_dump()),
    )


def jsonable(value: object) -> Any:
    """``value`` as plain JSON types (tuples become lists)."""
    return json.loads(json.dumps(value, default=lambda v: list(v) if isinstance(v, (tuple, set)) else str(v)))


def differences(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two JSON-like dicts (missing on one side included)."""
    out = []
    for key in sorted(set(a) | set(b)):
        name = f"{prefix}{key}"
        va, vb = a.get(key, "<missing>"), b.get(key, "<missing>")
        if isinstance(va, dict) and isinstance(vb, dict):
            out.extend(differences(va, vb, name + "."))
        elif va != vb:
            out.append(name)
    return out


def resolve_checkpoint(path: str | Path) -> Path:
    """The ``supernet.safetensors`` of a training folder, a checkpoint folder, or the file itself.

    Raises:
        ConfigError: Nothing readable there (names the path).
    """
    p = Path(path).expanduser()
    for candidate in (p, p / WEIGHTS, p / "checkpoint" / WEIGHTS, p / "checkpoint.old" / WEIGHTS):
        if candidate.is_file():
            return candidate
    raise ConfigError(f"{p}: no supernet checkpoint there (expected a training folder, its checkpoint/ or "
                      f"a {WEIGHTS} file)")


def read_identity(path: str | Path) -> SupernetIdentity:
    """The identity recorded in a checkpoint's weights file, without loading the weights."""
    from safetensors import safe_open

    file = resolve_checkpoint(path)
    try:
        with safe_open(str(file), framework="pt") as fh:
            meta = fh.metadata() or {}
    except Exception as exc:  # a truncated or foreign file
        raise ConfigError(f"{file}: cannot read the supernet weights ({' '.join(str(exc).split())[:200]})") from None
    if META_KEY not in meta:
        raise ConfigError(f"{file}: not an hwnas supernet checkpoint (no {META_KEY!r} metadata)")
    try:
        data = json.loads(meta[META_KEY])
    except ValueError as exc:
        raise ConfigError(f"{file}: corrupt checkpoint metadata ({exc})") from None
    return SupernetIdentity.from_json(data, str(file))


def check_identity(found: SupernetIdentity, expected: SupernetIdentity, where: str) -> None:
    """Refuse weights of another space, supernet or parameters, naming every differing key.

    The space's parameters that change no network (:func:`~hwnas.search_spaces.base.neutral_params`, NB201's
    ``merge_isomorphic``) are not compared: the same weights serve any value of them.
    """
    from hwnas.search_spaces import SPACES
    from hwnas.search_spaces.base import neutral_params

    if found.space != expected.space:
        raise ConfigError(f"{where}: the checkpoint is a supernet of space {found.space!r}, not {expected.space!r}")
    if found.supernet != expected.supernet:
        raise ConfigError(f"{where}: the checkpoint is supernet {found.supernet!r}, not {expected.supernet!r}")
    neutral = neutral_params(SPACES.get(expected.space))
    diff = [k for k in differences(found.space_params, expected.space_params) if k.split(".")[0] not in neutral]
    if diff:
        shown = ", ".join(f"{k} (checkpoint {_get(found.space_params, k)!r}, here {_get(expected.space_params, k)!r})"
                          for k in diff[:4])
        raise ConfigError(f"{where}: the checkpoint's {found.space} space has other parameters: {shown}")
    diff = differences(found.supernet_params, expected.supernet_params)
    if diff:
        raise ConfigError(f"{where}: the checkpoint's supernet has other parameters: {', '.join(diff)}")


def trained_on(path: str | Path) -> dict[str, Any] | None:
    """The dataset section a checkpoint was trained with, every default filled in: the one its weights' metadata
    records, else the ``dataset`` of ``supernet.json`` in its training folder (checkpoints written before the
    metadata held it); None when neither is there.

    Raises:
        ConfigError: The record cannot be read or does not validate (the file named).
    """
    from pydantic import ValidationError
    from safetensors import safe_open

    from hwnas.data.datasets import DataConfig

    file = resolve_checkpoint(path)
    source: Path = file
    try:
        with safe_open(str(file), framework="pt") as fh:
            section = json.loads((fh.metadata() or {}).get(META_KEY, "{}")).get("dataset")
        if section is None:
            source = file.parent.parent / "supernet.json"
            if not source.is_file():
                return None
            section = json.loads(source.read_text()).get("dataset", {})
        return jsonable(DataConfig(**section).model_dump())
    except (ValueError, TypeError, AttributeError, ValidationError, OSError) as exc:
        raise ConfigError(f"{source}: cannot read the dataset the supernet was trained on "
                          f"({' '.join(str(exc).split())[:200]})") from None


def _dataset_words(cfg: dict[str, Any]) -> str:
    """``mnist5k (val_fraction 0.25, split_seed 0)``: a dataset section in a few words."""
    extra = [f"{k} {cfg[k]}" for k in ("path", "val_fraction", "split_seed", "max_images") if cfg.get(k) is not None]
    return f"{cfg.get('name')} ({', '.join(extra)})"


def check_trained_on(path: str | Path, dataset: Any, where: str) -> None:
    """Refuse to score a checkpoint on data other than what it was trained on: another dataset, or the same one
    split or subsampled otherwise (its held-out images would not be the ones it never saw). Resolution is part of
    the space's parameters, which :func:`check_identity` compares. A checkpoint that records no dataset (written
    before the weights' metadata held it, and outside its training folder) is not checked.

    Args:
        path: A training folder, its checkpoint or its weights file.
        dataset: The scoring data's ``DataConfig``.
        where: What the message starts with.

    Raises:
        ConfigError: The two differ (both named, and the differing keys).
    """
    found = trained_on(path)
    if found is None:
        return
    expected = jsonable(dataset.model_dump())
    diff = differences(found, expected)
    if diff:
        raise ConfigError(f"{where}: the checkpoint was trained on {_dataset_words(found)}, the scoring data is "
                          f"{_dataset_words(expected)} (they differ in {', '.join(diff)}); score it on the data it "
                          "was trained on, or train a supernet on this data")


def _get(data: dict[str, Any], dotted: str) -> Any:
    value: Any = data
    for part in dotted.split("."):
        value = value.get(part, "<missing>") if isinstance(value, dict) else "<missing>"
    return value


def load_supernet(path: str | Path, *, space: SearchSpace | None = None, device: str = "cpu") -> Any:
    """Build the supernet a checkpoint describes and load its weights.

    Args:
        path: A training folder, a checkpoint folder or a ``supernet.safetensors`` file.
        space: When given, the checkpoint must be of this space with these parameters (else ConfigError,
            naming the differing parameters); the supernet is built over this instance.
        device: Where the weights go.

    Raises:
        ConfigError: Not a checkpoint, another space or width, or weights that do not fit.
    """
    import torch
    from safetensors.torch import load_file

    from hwnas.search_spaces import SPACES
    from hwnas.supernet.fewshot import make_supernet

    file = resolve_checkpoint(path)
    ident = read_identity(file)
    if space is None:
        space = SPACES.create(ident.space, ident.space_params)
    elif space.name != ident.space:
        raise ConfigError(f"{file}: the checkpoint is a supernet of space {ident.space!r}, not {space.name!r}")
    supernet = make_supernet(ident.supernet, ident.supernet_params, space=space,
                             generator=torch.Generator().manual_seed(0))
    check_identity(ident, identity_of(supernet), str(file))
    state = load_file(str(file), device=device)
    own = supernet.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    wrong = sorted(k for k in set(own) & set(state) if tuple(own[k].shape) != tuple(state[k].shape))
    if missing or unexpected or wrong:
        what = (f"missing {missing[:3]}" if missing else f"unexpected {unexpected[:3]}" if unexpected
                else f"shape of {wrong[0]} is {tuple(state[wrong[0]].shape)}, expected {tuple(own[wrong[0]].shape)}")
        raise ConfigError(f"{file}: the weights do not fit the supernet ({what})")
    supernet.load_state_dict(state)
    return supernet.to(device)


def save_checkpoint(folder: Path, supernet: Supernet, *, trainer: dict[str, Any], state: dict[str, Any],
                    dataset: dict[str, Any] | None = None) -> Path:
    """Write ``folder/checkpoint`` atomically (see the module docstring); returns its path. ``dataset`` (the training
    data's section, as JSON) is recorded in the weights' metadata beside the identity (:func:`trained_on`)."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    final, old = folder / "checkpoint", folder / "checkpoint.old"
    tmp = folder / f".checkpoint.{os.getpid()}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    weights = {k: v.detach().to("cpu").contiguous() for k, v in supernet.state_dict().items()}
    meta = identity_of(supernet).to_json()
    if dataset is not None:
        meta["dataset"] = dataset
    save_file(weights, str(tmp / WEIGHTS), metadata={META_KEY: json.dumps(meta)})
    torch.save(trainer, tmp / TRAINER)
    (tmp / STATE).write_text(json.dumps(state, indent=1))
    for f in tmp.iterdir():
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())
    if final.exists():
        if old.exists():
            shutil.rmtree(old)
        os.replace(final, old)
    os.replace(tmp, final)
    if old.exists():
        shutil.rmtree(old)
    return final


def load_training_state(folder: Path) -> tuple[Path, dict[str, Any], dict[str, Any]] | None:
    """(checkpoint folder, trainer dict, state dict) of the newest complete checkpoint under ``folder``, or None."""
    import torch

    for ck in (folder / "checkpoint", folder / "checkpoint.old"):
        if (ck / WEIGHTS).is_file() and (ck / TRAINER).is_file() and (ck / STATE).is_file():
            try:
                state = json.loads((ck / STATE).read_text())
                trainer = torch.load(ck / TRAINER, map_location="cpu", weights_only=True)
            except Exception as exc:  # torn or foreign
                raise ConfigError(f"{ck}: cannot read the checkpoint ({' '.join(str(exc).split())[:200]})") from None
            return ck, trainer, state
    return None

