#!/usr/bin/env python3
"""Classify images with an exported model and time it on this machine: the predictor of an hwnas bundle.

Needs only Python 3.8+, numpy and onnxruntime (no torch, no Pillow, no hwnas). Run it from the unpacked
bundle (``unzip <id>.bundle.zip``; ``python <id>/predict.py IMAGE [IMAGE ...]``): it reads ``bundle.json``
beside it, checks the model file's sha256, and runs the graph that takes raw images (``<id>.raw.onnx``), which
does the dataset's preprocessing itself (cast, scale, resize, normalise, transpose: ``bundle.json``'s
``contract``).

Images:

- ``.png``: 8- or 16-bit (16-bit keeps its high byte), grey, grey+alpha, RGB, RGBA or palette, not interlaced,
  decoded here with the standard library's zlib; alpha is dropped.
- ``.pgm`` / ``.ppm`` (P2, P3, P5, P6).
- ``.npy``: an integer array H x W or H x W x C already in the model's raw value range (``contract.source``,
  e.g. 0..16 for the digits), read with ``allow_pickle=False``.

An 8-bit image file (0..255) is brought to the raw value range when that is not 0..255 (the digits' 0..16:
``round(v * 16 / 255)``); RGB becomes grey with Pillow's ITU-R 601-2 luma weights when the model takes one grey
channel, and grey is repeated when it takes RGB. The image must already have the size the graph takes (for an
image-folder model: its resolution, resized with Pillow's bilinear filter, as the contract says).

Prints per image the class, its probability, and the latency measured here (median and p90 of ``--runs`` timed
runs after ``--warmup``, batch 1); ``--json`` prints one JSON object per image instead. Exit status 2 with one
line naming the problem on a bad image or bundle.
"""

from __future__ import annotations  # annotations are not evaluated: Python 3.8 reads this file

import argparse
import hashlib
import json
import os
import struct
import sys
import time
import zlib
from typing import TYPE_CHECKING, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

if TYPE_CHECKING:
    from onnxruntime import InferenceSession

BUNDLE_VERSION = 1
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


class BadInput(Exception):
    """An image or bundle this predictor cannot use: one line saying why."""


class Bundle(NamedTuple):
    """What the predictor reads of ``bundle.json``."""

    model: str  # the path of the graph that takes raw images
    height: int
    width: int
    channels: int
    source_max: int  # raw values are 0..source_max
    classes: List[str]
    first_step: str  # the contract's first step in words (the raw image it expects)


# -- images ---------------------------------------------------------------------------------------------------
def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def _unfilter(raw: bytes, height: int, stride: int, bpp: int) -> bytes:
    """The PNG scanlines without their filters (types 0 to 4), as bytes."""
    out = bytearray(height * stride)
    prev = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind = raw[start]
        line = bytearray(raw[start + 1 : start + 1 + stride])
        if len(line) != stride:
            raise BadInput("the PNG's image data is truncated")
        if kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif kind == 2:
            line = bytearray(((np.frombuffer(bytes(line), np.uint8).astype(np.uint16)
                               + np.frombuffer(bytes(prev), np.uint8)) & 0xFF).astype(np.uint8).tobytes())
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                upleft = prev[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + _paeth(left, prev[i], upleft)) & 0xFF
        elif kind != 0:
            raise BadInput("unknown PNG filter type %d" % kind)
        out[y * stride : (y + 1) * stride] = line
        prev = line
    return bytes(out)


def read_png(data: bytes) -> np.ndarray:
    """An 8-bit H x W x C array from PNG bytes (see the module's docstring for what is read)."""
    if data[:8] != PNG_SIGNATURE:
        raise BadInput("not a PNG file (bad signature)")
    pos = 8
    header = None  # type: Optional[Tuple[int, ...]]
    palette = None  # type: Optional[np.ndarray]
    chunks = []  # type: List[bytes]
    while pos + 8 <= len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"PLTE":
            palette = np.frombuffer(body, np.uint8).reshape(-1, 3)
        elif kind == b"IDAT":
            chunks.append(body)
        elif kind == b"IEND":
            break
    if header is None or not chunks:
        raise BadInput("the PNG has no header or no image data")
    width, height, depth, color, _, _, interlace = header
    if color not in PNG_CHANNELS or depth not in (1, 2, 4, 8, 16) or interlace:
        raise BadInput("unsupported PNG (colour type %d, bit depth %d, interlace %d): save it as a non-interlaced "
                       "8-bit PNG, or as .npy" % (color, depth, interlace))
    channels = PNG_CHANNELS[color]
    stride = (width * channels * depth + 7) // 8
    try:
        raw = zlib.decompress(b"".join(chunks))
    except zlib.error as exc:
        raise BadInput("the PNG's image data does not decompress: %s" % exc) from None
    rows = np.frombuffer(_unfilter(raw, height, stride, max(1, channels * depth // 8)), np.uint8)
    rows = rows.reshape(height, stride)
    if depth == 16:
        img = rows.reshape(height, width * channels, 2)[:, :, 0]
    elif depth < 8:
        values = np.unpackbits(rows, axis=1).reshape(height, -1, depth)[:, : width * channels]
        img = (values * (1 << np.arange(depth - 1, -1, -1))).sum(axis=2).astype(np.uint8)
        if color == 0:
            img = (img.astype(np.uint16) * 255 // ((1 << depth) - 1)).astype(np.uint8)
    else:
        img = rows[:, : width * channels]
    img = img.reshape(height, width, channels)
    if color == 3:
        if palette is None:
            raise BadInput("the palette PNG has no palette")
        img = palette[img[:, :, 0]]
    if img.shape[2] in (2, 4):  # alpha dropped
        img = img[:, :, : img.shape[2] - 1]
    return np.ascontiguousarray(img)


def read_pnm(data: bytes) -> np.ndarray:
    """An 8-bit H x W x C array from PGM/PPM bytes (P2, P3, P5, P6)."""
    tokens = []  # type: List[bytes]
    pos = 0
    while len(tokens) < 4:
        while pos < len(data) and data[pos : pos + 1].isspace():
            pos += 1
        if data[pos : pos + 1] == b"#":
            while pos < len(data) and data[pos : pos + 1] not in (b"\n", b"\r"):
                pos += 1
            continue
        start = pos
        while pos < len(data) and not data[pos : pos + 1].isspace():
            pos += 1
        if start == pos:
            raise BadInput("the PGM/PPM header is incomplete")
        tokens.append(data[start:pos])
    magic = tokens[0]
    if magic not in (b"P2", b"P3", b"P5", b"P6"):
        raise BadInput("not a PGM/PPM file (P2, P3, P5 or P6)")
    width, height, maxval = (int(t) for t in tokens[1:])
    channels = 3 if magic in (b"P3", b"P6") else 1
    count = width * height * channels
    if magic in (b"P5", b"P6"):
        dtype = np.dtype(np.uint8) if maxval < 256 else np.dtype(">u2")
        body = data[pos + 1 : pos + 1 + count * dtype.itemsize]
        if len(body) != count * dtype.itemsize:
            raise BadInput("the PGM/PPM pixel data is truncated")
        values = np.frombuffer(body, dtype).astype(np.float64)
    else:
        values = np.array([int(t) for t in data[pos:].split()[:count]], dtype=np.float64)
        if len(values) != count:
            raise BadInput("the PGM/PPM pixel data is truncated")
    if maxval != 255:
        values = np.rint(values * 255.0 / maxval)
    return values.astype(np.uint8).reshape(height, width, channels)


def read_image(path: str, source_max: int) -> Tuple[np.ndarray, str]:
    """(uint8 H x W x C in the raw value range 0..source_max, what it was read as)."""
    ext = os.path.splitext(path)[1].lower()
    if ext == ".npy":
        try:
            arr = np.load(path, allow_pickle=False)
        except ValueError as exc:  # not an .npy file, or one holding Python objects
            raise BadInput("%s: not a readable .npy array (%s)" % (path, exc)) from None
        if arr.ndim == 2:
            arr = arr[:, :, None]
        if arr.ndim != 3 or arr.dtype.kind not in "iuf":
            raise BadInput("%s: a .npy image is a number array H x W or H x W x C, got %s %s"
                           % (path, arr.dtype, arr.shape))
        if arr.size and (arr.min() < 0 or arr.max() > source_max or np.any(arr != np.rint(arr))):
            raise BadInput("%s: a .npy image holds whole raw values 0..%d (the model's raw range), got %g..%g"
                           % (path, source_max, arr.min(), arr.max()))
        return arr.astype(np.uint8), "npy"
    with open(path, "rb") as fh:
        data = fh.read()
    if ext == ".png":
        img = read_png(data)
    elif ext in (".pgm", ".ppm", ".pnm"):
        img = read_pnm(data)
    else:
        raise BadInput("%s: unsupported image type %r (.png, .pgm, .ppm or .npy)" % (path, ext or "no extension"))
    if source_max != 255:  # an 8-bit file, brought to the raw range the model was trained on
        img = np.rint(img.astype(np.float64) * source_max / 255.0).astype(np.uint8)
    return img, ext[1:]


def to_channels(img: np.ndarray, channels: int) -> np.ndarray:
    """``img`` with ``channels`` channels: RGB to grey with Pillow's "L" weights, grey repeated to RGB."""
    if img.shape[2] == channels:
        return img
    if channels == 1 and img.shape[2] == 3:
        rgb = img.astype(np.uint32)
        grey = (rgb[:, :, 0] * 19595 + rgb[:, :, 1] * 38470 + rgb[:, :, 2] * 7471 + 0x8000) >> 16
        return grey.astype(np.uint8)[:, :, None]
    if channels == 3 and img.shape[2] == 1:
        return np.repeat(img, 3, axis=2)
    raise BadInput("the image has %d channels; the model takes %d" % (img.shape[2], channels))


# -- the model ------------------------------------------------------------------------------------------------
def load_bundle(folder: str) -> Bundle:
    """The bundle in ``folder`` as its manifest describes it, its model file checked against its sha256."""
    path = os.path.join(folder, "bundle.json")
    try:
        with open(path, encoding="utf-8") as fh:
            manifest = json.load(fh)
    except (OSError, ValueError) as exc:
        raise BadInput("%s: cannot read the bundle's manifest (%s)" % (path, exc)) from None
    if not isinstance(manifest, dict) or manifest.get("bundle_version", 0) > BUNDLE_VERSION:
        raise BadInput("%s: a bundle of another version than this predictor reads (%d)" % (path, BUNDLE_VERSION))
    try:
        name = str(manifest["model"])
        shape = manifest["input"]["shape"]  # [batch, H, W, C]
        height, width, channels = int(shape[1]), int(shape[2]), int(shape[3])
        source_max = int(manifest["contract"]["source"]["value_range"][1])
        classes = [str(c) for c in manifest.get("classes") or []]
        steps = manifest["contract"].get("steps") or [""]
        expected = manifest["files"][name]
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise BadInput("%s: the manifest lacks %s" % (path, exc)) from None
    model = os.path.join(folder, os.path.basename(name))
    with open(model, "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()
    if digest != expected:
        raise BadInput("%s: the file does not match bundle.json's sha256 (changed or damaged)" % model)
    return Bundle(model, height, width, channels, source_max, classes, str(steps[0]))


def session_for(model: str, threads: int) -> InferenceSession:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def predict(session: InferenceSession, image: np.ndarray, warmup: int,
            runs: int) -> Tuple[int, np.ndarray, float, List[float]]:
    """(class index, probabilities, first run ms, timed runs in ms) for one raw H x W x C image."""
    name = session.get_inputs()[0].name
    x = image[None]
    start = time.perf_counter()
    logits = session.run(None, {name: x})[0][0].astype(np.float64)
    first = (time.perf_counter() - start) * 1e3
    for _ in range(warmup):
        session.run(None, {name: x})
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, {name: x})
        times.append((time.perf_counter() - start) * 1e3)
    e = np.exp(logits - logits.max())
    return int(np.argmax(logits)), e / e.sum(), first, times


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Classify images with this bundle's model and time it here "
                                                 "(numpy and onnxruntime only).")
    parser.add_argument("images", nargs="+", help=".png (8/16-bit), .pgm/.ppm, or .npy in the raw value range")
    parser.add_argument("--runs", type=int, default=50, help="timed runs per image (default 50)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed runs first (default 5)")
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads (default 1)")
    parser.add_argument("--json", action="store_true", help="one JSON object per image")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.warmup < 0 or args.threads < 1:
        print("error: --runs and --threads must be at least 1, --warmup at least 0", file=sys.stderr)
        return 2
    folder = os.path.dirname(os.path.abspath(__file__))
    try:
        bundle = load_bundle(folder)
        start = time.perf_counter()
        session = session_for(bundle.model, args.threads)
        load_ms = (time.perf_counter() - start) * 1e3
        for path in args.images:
            img, kind = read_image(path, bundle.source_max)
            img = to_channels(img, bundle.channels)
            if img.shape[:2] != (bundle.height, bundle.width):
                raise BadInput("%s: the image is %d x %d; the model takes %d x %d (%s)"
                               % (path, img.shape[0], img.shape[1], bundle.height, bundle.width, bundle.first_step))
            index, probs, first, times = predict(session, img, args.warmup, args.runs)
            label = bundle.classes[index] if index < len(bundle.classes) else str(index)
            median, p90 = float(np.median(times)), float(np.percentile(times, 90))
            if args.json:
                print(json.dumps({"image": path, "read_as": kind, "class": label, "index": index,
                                  "probability": float(probs[index]), "median_ms": median, "p90_ms": p90,
                                  "runs": len(times), "first_ms": first, "load_ms": load_ms,
                                  "threads": args.threads, "model": os.path.basename(bundle.model)}))
            else:
                print("%s: class %s (index %d, probability %.3f); latency %.3f ms median, %.3f ms p90 of %d runs "
                      "at batch 1, %d thread(s), on this machine (first run %.2f ms, model load %.1f ms)"
                      % (path, label, index, probs[index], median, p90, len(times), args.threads, first, load_ms))
    except BadInput as exc:
        print("error: %s" % exc, file=sys.stderr)
        return 2
    except OSError as exc:
        print("error: %s: %s" % (getattr(exc, "filename", None) or "", exc.strerror or exc), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
