"""The input contract of a dataset: how a raw image becomes the network's input, written once.

:class:`InputContract` *is* the pipeline :func:`hwnas.data.datasets.load` runs (cast, scale, resize, normalise,
transpose), the record an export writes on each model card (:meth:`InputContract.to_dict`, in the keys of timm's
``pretrained_cfg`` where timm has one: ``input_size``, ``interpolation``, ``mean``, ``std``, ``crop_pct`` ...),
and the same steps as a torch module in front of a network (:meth:`InputContract.wrap`), so that an ONNX graph
can take the raw image. The three cannot drift apart: they read the same fields.

Raw images are ``uint8``, ``H x W x C`` (height, width, channels last), at the source's size:

- ``digits``: scikit-learn's 8x8 digits, one grey channel, integer values 0..16 (divided by 16);
- ``mnist5k``: 28x28 MNIST, one grey channel, 0..255 (divided by 255);
- ``image_folder``: RGB, 0..255, of any size: resized to the network's resolution with Pillow's bilinear filter
  on the 8-bit image while reading (so the network-side input is ``resolution x resolution``).

Digits and MNIST are resized after scaling, on the float image, with torch's bilinear interpolation
(``align_corners=False``, no antialiasing), when the network's resolution differs from the source's. Every
channel is then normalised with the training split's mean and standard deviation (+1e-6), measured after the
resize.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from torch import nn

#: Added to every channel's standard deviation (no division by zero on a constant channel).
STD_EPS = 1e-6

#: Per dataset: (channels, channel order, the largest raw value, the raw image's (H, W); None: any size).
SOURCES: dict[str, tuple[int, str, int, tuple[int, int] | None]] = {
    "digits": (1, "L", 16, (8, 8)),
    "mnist5k": (1, "L", 255, (28, 28)),
    "image_folder": (3, "RGB", 255, None),
}


@dataclass(frozen=True)
class InputContract:
    """How a raw image (``uint8``, ``N x H x W x C``) becomes the network's ``float32`` ``N x C x H x W`` input.

    Args:
        dataset: ``digits``, ``mnist5k`` or ``image_folder``.
        resolution: The network's input height and width.
        mean: Per channel, subtracted after scaling (and resizing); empty until :meth:`with_stats`.
        std: Per channel, divided by after subtracting the mean (already including :data:`STD_EPS`).
    """

    dataset: str
    resolution: int
    mean: tuple[float, ...] = ()
    std: tuple[float, ...] = ()

    @property
    def channels(self) -> int:
        return SOURCES[self.dataset][0]

    @property
    def channel_order(self) -> str:
        """``L`` (one grey channel) or ``RGB``."""
        return SOURCES[self.dataset][1]

    @property
    def source_max(self) -> int:
        """Raw values are integers from 0 to this (16 for the digits, else 255); scaling divides by it."""
        return SOURCES[self.dataset][2]

    @property
    def source_size(self) -> tuple[int, int] | None:
        """The raw images' (H, W); None where they come in any size (an image folder: resized while read)."""
        return SOURCES[self.dataset][3]

    @property
    def raw_size(self) -> tuple[int, int]:
        """The (H, W) of what :meth:`to_unit` and the wrapped graph take: the source's own size, or the network's
        resolution where the images are resized while read (image folders)."""
        return self.source_size or (self.resolution, self.resolution)

    @property
    def resizes(self) -> bool:
        """Whether :meth:`to_unit` resizes (the raw size differs from the network's resolution)."""
        return self.raw_size != (self.resolution, self.resolution)

    # ------------------------------------------------------------------------------------------- the pipeline

    def to_unit(self, raw: np.ndarray) -> np.ndarray:
        """Raw ``uint8`` ``N x H x W x C`` -> ``float32`` ``N x C x r x r`` in [0, 1]: cast, channels first, divide by
        :attr:`source_max`, resize (torch bilinear, ``align_corners=False``) to the resolution when needed."""
        if raw.ndim != 4 or raw.shape[-1] != self.channels:
            raise ValueError(f"raw images must be N x H x W x {self.channels}, got shape {raw.shape}")
        x = raw.astype(np.float32).transpose(0, 3, 1, 2) / np.float32(self.source_max)  # NHWC memory, as before
        if x.shape[-2:] == (self.resolution, self.resolution):
            return x
        import torch
        import torch.nn.functional as F

        size = (self.resolution, self.resolution)
        return F.interpolate(torch.from_numpy(np.ascontiguousarray(x)), size=size, mode="bilinear",
                             align_corners=False).numpy()

    def with_stats(self, unit_train: np.ndarray) -> InputContract:
        """This contract with the per-channel mean and standard deviation (+ :data:`STD_EPS`) of the training
        split as :meth:`to_unit` gives it."""
        mean = unit_train.mean(axis=(0, 2, 3))
        std = unit_train.std(axis=(0, 2, 3)) + STD_EPS
        return replace(self, mean=tuple(float(m) for m in mean), std=tuple(float(s) for s in std))

    def normalise(self, unit: np.ndarray) -> np.ndarray:
        """``(x - mean) / std`` per channel, in float32."""
        if not self.mean:
            raise ValueError("the contract has no mean and std yet (with_stats)")
        mean = np.asarray(self.mean, dtype=np.float32).reshape(1, -1, 1, 1)
        std = np.asarray(self.std, dtype=np.float32).reshape(1, -1, 1, 1)
        return ((unit - mean) / std).astype(np.float32)

    def __call__(self, raw: np.ndarray) -> np.ndarray:
        """The whole pipeline: raw ``uint8`` ``N x H x W x C`` -> the network's normalised ``N x C x r x r``."""
        return self.normalise(self.to_unit(raw))

    # ------------------------------------------------------------------------------------------ in the graph

    def wrap(self, model: nn.Module) -> nn.Module:
        """``model`` behind the same steps as torch operations: the module takes raw ``uint8`` ``N x H x W x C``
        (at :attr:`raw_size`) and returns the model's output (for an ONNX graph that takes raw images)."""
        import torch
        import torch.nn.functional as F

        contract = self

        class WithPreprocessing(torch.nn.Module):
            """Cast, channels first, scale, resize, normalise, then the network."""

            mean: torch.Tensor
            std: torch.Tensor

            def __init__(self, inner: nn.Module) -> None:
                super().__init__()
                self.inner = inner
                self.register_buffer("mean", torch.tensor(contract.mean, dtype=torch.float32).view(1, -1, 1, 1))
                self.register_buffer("std", torch.tensor(contract.std, dtype=torch.float32).view(1, -1, 1, 1))

            def forward(self, raw: torch.Tensor) -> torch.Tensor:
                x = raw.permute(0, 3, 1, 2).to(torch.float32) / float(contract.source_max)
                if contract.resizes:
                    x = F.interpolate(x, size=(contract.resolution, contract.resolution), mode="bilinear",
                                      align_corners=False)
                return self.inner((x - self.mean) / self.std)

        return WithPreprocessing(model).eval()

    # ----------------------------------------------------------------------------------------------- the card

    def steps(self) -> list[str]:
        """The pipeline in words, in order."""
        h, w = self.raw_size
        out = [f"raw image: uint8, H x W x C = {h} x {w} x {self.channels} ({self.channel_order}), "
               f"values 0..{self.source_max}" if self.source_size else
               f"raw image: any size, RGB; resized to {self.resolution} x {self.resolution} with Pillow's "
               "Image.resize(..., Image.Resampling.BILINEAR) on the 8-bit RGB image, giving uint8 "
               f"{self.resolution} x {self.resolution} x 3, values 0..255"]
        out.append(f"cast to float32 and divide by {self.source_max} (values 0..1)")
        if self.resizes:
            out.append(f"resize {h} x {w} -> {self.resolution} x {self.resolution}: bilinear, align_corners=False, "
                       "no antialiasing (torch.nn.functional.interpolate; ONNX Resize linear, half_pixel)")
        out.append("per channel: subtract mean, divide by std (the training split's, after the resize)")
        out.append("channels first, batch axis in front: N x C x H x W")
        return out

    def to_dict(self) -> dict[str, object]:
        """The card's record of the contract: timm ``pretrained_cfg`` keys (``input_size`` [C, H, W],
        ``interpolation``, ``mean``, ``std``, ``crop_pct``, ``crop_mode``, ``fixed_input_size``) and the raw
        image it starts from (``source``), its scaling and resize, and the steps in words."""
        h, w = self.raw_size
        resize: dict[str, object] | None
        if self.source_size is None:
            resize = {"size": [self.resolution, self.resolution], "interpolation": "bilinear",
                      "where": "while reading, on the 8-bit RGB image, before scaling",
                      "implementation": "PIL Image.resize(..., Image.Resampling.BILINEAR) (antialiased when shrinking)"}
        elif self.resizes:
            resize = {"size": [self.resolution, self.resolution], "interpolation": "bilinear",
                      "align_corners": False, "antialias": False, "where": "after scaling, on the float image",
                      "implementation": "torch.nn.functional.interpolate(mode='bilinear', align_corners=False)"}
        else:
            resize = None
        return {
            "input_size": [self.channels, self.resolution, self.resolution],
            "fixed_input_size": True,
            "interpolation": "bilinear",
            "crop_pct": 1.0,
            "crop_mode": None,
            "mean": list(self.mean),
            "std": list(self.std),
            "dtype": "float32",
            "layout": "NCHW",
            "in_chans": self.channels,
            "channel_order": self.channel_order,
            "source": {"dataset": self.dataset, "dtype": "uint8", "layout": "HWC",
                       "size": [h, w] if self.source_size else None, "channels": self.channels,
                       "value_range": [0, self.source_max]},
            "scale": {"divide_by": self.source_max, "value_range_after": [0.0, 1.0]},
            "resize": resize,
            "steps": self.steps(),
        }


def contract_for(dataset: str, resolution: int) -> InputContract:
    """The contract (without statistics) of dataset ``dataset`` at ``resolution``.

    Raises:
        ValueError: A dataset without a known contract.
    """
    if dataset not in SOURCES:
        raise ValueError(f"no input contract for dataset {dataset!r} (known: {', '.join(SOURCES)})")
    return InputContract(dataset=dataset, resolution=resolution)
