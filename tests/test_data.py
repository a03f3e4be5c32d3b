from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from hwnas.data import DataConfig, describe, load
from hwnas.errors import ConfigError


def _folder(root, classes=("cat", "dog"), per_class=6, size=12):
    rng = np.random.default_rng(0)
    for ci, c in enumerate(classes):
        (root / c).mkdir(parents=True)
        for i in range(per_class):
            pixels = (rng.random((size, size, 3)) * 80 + 120 * ci).astype(np.uint8)
            Image.fromarray(pixels).save(root / c / f"{i}.png")


def test_digits_split_is_seeded_and_normalised():
    a = load(DataConfig(name="digits"), 8)
    b = load(DataConfig(name="digits"), 8)
    assert np.array_equal(a.y_val, b.y_val) and a.x_train.shape[1:] == (1, 8, 8)
    assert len(a.x_train) + len(a.x_val) == 1797 and abs(len(a.x_val) / 1797 - 0.25) < 0.01
    assert abs(float(a.x_train.mean())) < 1e-4
    up = load(DataConfig(name="digits", split_seed=1), 16)
    assert up.x_val.shape[-2:] == (16, 16) and not np.array_equal(up.y_val, a.y_val)


def test_image_folder_with_and_without_a_val_split(tmp_path):
    _folder(tmp_path / "flat")
    cfg = DataConfig(name="image_folder", path=str(tmp_path / "flat"), val_fraction=0.5)
    assert describe(cfg) == (3, 2)
    data = load(cfg, 8)
    assert data.classes == ["cat", "dog"] and data.x_train.shape[1:] == (3, 8, 8) and len(data.x_val) == 6
    _folder(tmp_path / "split" / "train")
    _folder(tmp_path / "split" / "val", per_class=2)
    data = load(DataConfig(name="image_folder", path=str(tmp_path / "split")), 8)
    assert len(data.x_train) == 12 and len(data.x_val) == 4


def test_max_images_shrinks_train_and_val_folders_in_proportion(tmp_path):
    _folder(tmp_path / "train", per_class=6)
    _folder(tmp_path / "val", per_class=2)
    cfg = DataConfig(name="image_folder", path=str(tmp_path), max_images=8)
    data = load(cfg, 8)
    assert (len(data.x_train), len(data.x_val)) == (6, 2)  # 16 images as 12 + 4, so 8 as 6 + 2
    again = load(cfg, 8)
    assert np.array_equal(data.x_train, again.x_train) and np.array_equal(data.y_val, again.y_val)
    other = load(DataConfig(name="image_folder", path=str(tmp_path), max_images=8, split_seed=3), 8)
    assert not np.array_equal(other.x_train, data.x_train)
    assert len(load(DataConfig(name="image_folder", path=str(tmp_path), max_images=100), 8).x_train) == 12
    with pytest.raises(ConfigError, match="max_images: 1 cannot hold"):
        load(DataConfig(name="image_folder", path=str(tmp_path), max_images=1), 8)


def test_image_folder_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        describe(DataConfig(name="image_folder", path=str(tmp_path / "missing")))
    (tmp_path / "one" / "only").mkdir(parents=True)
    with pytest.raises(ConfigError, match="at least two class folders"):
        describe(DataConfig(name="image_folder", path=str(tmp_path / "one")))
    with pytest.raises(ConfigError, match="needs a path"):
        describe(DataConfig(name="image_folder"))


def _starved(data, classes):
    """(class, images to train on, held out) of the first class that ``load`` left without one of the two."""
    n_tr = np.bincount(data.y_train, minlength=len(classes))
    n_va = np.bincount(data.y_val, minlength=len(classes))
    i = next(i for i in range(len(classes)) if n_tr[i] == 0 or n_va[i] == 0)
    return classes[i], int(n_tr[i]), int(n_va[i])


@pytest.mark.parametrize("name", ["digits", "mnist5k"])
def test_max_images_that_starves_a_class_of_digits_is_refused_naming_it_as_load_would_draw_it(name):
    from hwnas.data.datasets import check

    cfg = DataConfig(name=name, max_images=40)
    c, n_tr, n_va = _starved(load(cfg, 8), [str(k) for k in range(10)])  # what a run would train on: unchecked
    with pytest.raises(ConfigError, match=rf"^dataset\.max_images: class '{c}' of {name} has {n_tr + n_va} image\(s\) "
                                          rf"kept of max_images 40 \({n_tr} to train on, {n_va} held out\): too few "
                                          "for the split"):
        check(cfg)
    check(DataConfig(name=name, max_images=400))  # enough of every class
    check(DataConfig(name=name))


def test_max_images_that_starves_a_class_of_train_and_val_folders_is_refused_naming_it(tmp_path):
    from hwnas.data.datasets import check

    classes = ["bird", "cat", "dog"]
    _folder(tmp_path / "train", classes=("cat", "dog"), per_class=6)
    _folder(tmp_path / "val", classes=("cat", "dog"), per_class=2)
    for split in ("train", "val"):
        (tmp_path / split / "bird").mkdir()
        Image.new("RGB", (12, 12), (1, 2, 3)).save(tmp_path / split / "bird" / "0.png")
    cfg = DataConfig(name="image_folder", path=str(tmp_path), max_images=6)
    c, n_tr, n_va = _starved(load(cfg, 8), classes)
    with pytest.raises(ConfigError, match=rf"^dataset\.max_images: class '{c}' of the train/ and val/ folders under "
                                          rf".* has {n_tr + n_va} image\(s\) kept of max_images 6 \({n_tr} to train "
                                          rf"on, {n_va} held out\): too few for the split"):
        check(cfg)
    check(DataConfig(name="image_folder", path=str(tmp_path)))  # unshrunk, every class is in both folders
