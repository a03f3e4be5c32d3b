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
