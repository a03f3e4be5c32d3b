"""Supernet training: progressive shrinking, the sandwich rule, in-place distillation, resumable checkpoints.

One step of a phase trains, on one batch, the largest subnet (cross-entropy; its logits are the teacher),
the smallest subnet reachable in the phase and ``random_subnets`` random ones (cross-entropy plus
``distill_weight`` times the KL divergence to the teacher's softened logits), summing their gradients into
one optimiser step (the sandwich rule of BigNAS / once-for-all with in-place distillation). Phases run
in the supernet's order (``largest -> kernel -> depth -> expand`` for once-for-all's MobileNetV3), each
with its own epochs and a cosine learning-rate schedule; the supernet's ``begin_phase`` runs before each
(once-for-all sorts channels by importance before elastic width).

After every epoch the largest and the smallest subnet are extracted, their BatchNorm statistics
recalibrated on training images, and their held-out top-1 measured; the figures go to ``curves.csv`` and
``curves.png``, and a checkpoint is written (:mod:`hwnas.supernet.checkpoint`). A killed run resumes from
its last checkpoint with the same batches and subnets it would have drawn; a non-finite loss stops the
run at once, naming the step, and leaves the last good checkpoint in place.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from hwnas.architecture import Architecture
from hwnas.data.datasets import DataConfig, DataSource, ImageData
from hwnas.errors import ConfigError, OutputExists, TrainingDiverged
from hwnas.fileio import FolderLock, atomic_write, check_folder_writable
from hwnas.registry import ComponentSpec, Name, Seed
from hwnas.supernet.checkpoint import (
    WEIGHTS,
    check_identity,
    differences,
    identity_of,
    load_training_state,
    read_identity,
    save_checkpoint,
)

if TYPE_CHECKING:
    import torch
    from torch import nn

    from hwnas.search_spaces.base import SearchSpace
    from hwnas.supernet.base import Supernet, TrainableSupernet

log = logging.getLogger(__name__)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PhaseConfig(_Strict):
    """One phase of progressive shrinking."""

    phase: str = Field(description="a phase of the supernet (e.g. largest, kernel, depth, expand; uniform for cells)")
    epochs: int = Field(ge=1)
    lr: float | None = Field(None, gt=0, description="peak learning rate of the phase (default optimizer.lr)")


class OptimizerConfig(_Strict):
    """The optimiser of the shared weights."""

    name: Literal["sgd", "adamw"] = "sgd"
    lr: float = Field(0.05, gt=0)
    momentum: float = Field(0.9, ge=0, lt=1)
    weight_decay: float = Field(3e-5, ge=0)
    grad_clip: float | None = Field(5.0, gt=0, description="clip the global gradient norm (null: no clipping)")


class SupernetTrainConfig(_Strict):
    """The ``supernet:`` section of a supernet training file."""

    name: Name = Field("supernet", description="the output folder's name")
    space: ComponentSpec
    params: dict[str, Any] = Field(default_factory=dict, description="the supernet's own parameters")
    dataset: DataConfig = Field(default_factory=DataConfig)
    phases: tuple[PhaseConfig, ...] | None = Field(
        None, description="phases in order; default: every phase of the supernet, epochs_per_phase each")
    epochs_per_phase: int = Field(2, ge=1)
    batch_size: int = Field(64, ge=2)
    optimizer: OptimizerConfig = Field(default_factory=OptimizerConfig)
    random_subnets: int = Field(2, ge=0, description="random subnets per step besides the largest and smallest")
    distill_weight: float = Field(1.0, ge=0, description="weight of the in-place distillation loss (0: none)")
    distill_temperature: float = Field(1.0, gt=0)
    label_smoothing: float = Field(0.1, ge=0, lt=1)
    calib_images: int = Field(500, ge=2, description="training images for BatchNorm recalibration in evaluation")
    eval_images: int | None = Field(None, ge=1, description="held-out images per evaluation (default all)")
    checkpoint_every: int = Field(200, ge=1, description="also checkpoint every this many steps within an epoch")
    seed: Seed = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"
    amp: bool = Field(True, description="bfloat16 autocast on a GPU (ignored on the CPU)")
    channels_last: bool = Field(True, description="channels-last memory format on a GPU (ignored on the CPU)")
    threads: int | None = Field(None, ge=1, description="torch CPU threads (default torch's)")


# the keys that may change when a run is resumed: where it runs, not what it computes
RESUMABLE_CHANGES = frozenset({"device", "threads", "checkpoint_every"})


@dataclass
class StepEvent:
    """What the progress display gets after every step."""

    phase: str
    phase_index: int
    epoch: int
    epochs: int
    step: int
    steps: int
    loss: float


@dataclass
class TrainResult:
    """The finished (or stopped) training run."""

    out_dir: Path
    checkpoint: Path
    curves: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    steps: int = 0
    #: A resume found the training already finished: nothing was trained.
    already_finished: bool = False


def build_parts(cfg: SupernetTrainConfig) -> tuple[Any, Any, DataSource, int]:
    """(space, supernet, data source, load resolution) of a config; the space's channels and classes from the data.

    Raises:
        ConfigError: Unknown space or supernet, parameters that do not validate, a phase the supernet has not.
    """
    import torch

    from hwnas.data import datasets as data_mod
    from hwnas.search_spaces import SPACES
    from hwnas.supernet.base import SUPERNETS
    from hwnas.supernet.fewshot import SPLIT_PHASE, FewShotSupernet, make_supernet

    if cfg.space.name not in SUPERNETS:
        raise ConfigError(f"supernet.space.name: no supernet for space {cfg.space.name!r} "
                          f"(supernets exist for: {', '.join(SUPERNETS.names())})")
    in_chans, num_classes = data_mod.describe(cfg.dataset)
    space_params = dict(cfg.space.params)
    space_cls: Any = SPACES.get(cfg.space.name)
    fields = getattr(space_cls.Params, "model_fields", {})
    for key, value in (("in_chans", in_chans), ("num_classes", num_classes)):
        if key in fields:
            if key in space_params and space_params[key] != value:
                raise ConfigError(f"supernet.space.params.{key}: {space_params[key]} but the dataset has {value}")
            space_params[key] = value
    space = SPACES.create(cfg.space.name, space_params)
    # a TrainableSupernet in practice (phases, largest, ...), not checked here: typed as such once this is split
    supernet: Any = make_supernet(cfg.space.name, cfg.params, space=space,
                                  generator=torch.Generator().manual_seed(cfg.seed))
    for i, ph in enumerate(cfg.phases or ()):
        if ph.phase not in supernet.phases:
            hint = " (a few-shot split needs supernet.params.split: GENE)" if ph.phase == SPLIT_PHASE else ""
            raise ConfigError(f"supernet.phases[{i}].phase: {ph.phase!r} is not a phase of the {cfg.space.name} "
                              f"supernet (its phases: {', '.join(supernet.phases)}){hint}")
    if isinstance(supernet, FewShotSupernet) and cfg.phases is not None:
        names = [ph.phase for ph in cfg.phases]
        if SPLIT_PHASE not in names or names.index(SPLIT_PHASE) != len(names) - 1:
            raise ConfigError(f"supernet.phases: supernet.params.split ({supernet.gene}) needs a "
                              f"{{phase: {SPLIT_PHASE}, epochs: N}} phase, the last one")
    resolution = int(space.input_shape[-1])
    return space, supernet, DataSource(cfg.dataset), resolution


def phase_plan(cfg: SupernetTrainConfig, supernet: TrainableSupernet) -> list[PhaseConfig]:
    """The phases to run: the config's, or every phase of the supernet with ``epochs_per_phase``; a few-shot
    supernet's ``split`` phase runs as one phase per value of its gene, each with the configured epochs."""
    from hwnas.supernet.fewshot import expand_split

    phases = list(cfg.phases) if cfg.phases else [PhaseConfig(phase=p, epochs=cfg.epochs_per_phase)
                                                  for p in supernet.phases]
    return [ph.model_copy(update={"phase": name}) for ph in phases for name in expand_split(ph.phase, supernet)]


def resize_for(space: SearchSpace, arch: Architecture, x: torch.Tensor) -> torch.Tensor:
    """``x`` resized (bilinear) to the architecture's own input size when that differs (elastic resolution)."""
    import torch.nn.functional as F

    size = tuple(int(s) for s in space.input_shape_of(arch)[1:])
    if tuple(x.shape[-2:]) == size:
        return x
    return F.interpolate(x, size=size, mode="bilinear", align_corners=False)


def inherited_subnet(supernet: Supernet, arch: Architecture, x_train: np.ndarray, *, calib_images: int,
                     batch_size: int = 128) -> nn.Module:
    """``arch``'s standalone network with the supernet's weights (on the CPU), its BatchNorm statistics
    recalibrated on the first ``calib_images`` training images (resized to the architecture's input), in eval mode."""
    import torch

    from hwnas.training.recipe import recalibrate_bn

    module = supernet.extract(arch).cpu()
    x_cal = resize_for(supernet.space, arch, torch.from_numpy(x_train[:calib_images])).numpy()
    return recalibrate_bn(module, x_cal, batch_size=batch_size, max_images=None)


def finetune_subnet(module: nn.Module, space: SearchSpace, arch: Architecture, data: ImageData, *, epochs: int,
                    lr: float, optimizer: str = "sgd", seed: int = 0) -> nn.Module:
    """Train an extracted subnet (all of it) for ``epochs`` on the training split, in place, with the
    one-cycle recipe of the ``train`` evaluator (``optimizer`` ``sgd`` or ``adamw``, peak ``lr``); batches drawn
    from a generator seeded by (``seed``, the architecture). Returns the module in eval mode."""
    import torch

    from hwnas.training.recipe import TrainRecipe, seed_for, train_model

    x = resize_for(space, arch, torch.from_numpy(data.x_train)).numpy()
    recipe = TrainRecipe(epochs=epochs, lr=lr, optimizer=optimizer)
    gen = torch.Generator().manual_seed(seed_for(seed, arch))
    return train_model(module, x, data.y_train, recipe, generator=gen, name=arch.arch_id)


def score_subnet(supernet: Supernet, arch: Architecture, data: ImageData, *, calib_images: int,
                 eval_images: int | None = None, batch_size: int = 256) -> tuple[float, float]:
    """(held-out top-1, loss) of a subnet with inherited weights: extracted, BatchNorm recalibrated, evaluated."""
    import torch

    from hwnas.training.recipe import evaluate_top1

    module = inherited_subnet(supernet, arch, data.x_train, calib_images=calib_images,
                              batch_size=min(batch_size, 128))
    x_val = resize_for(supernet.space, arch, torch.from_numpy(data.x_val[:eval_images])).numpy()
    return evaluate_top1(module, x_val, data.y_val[:eval_images], batch_size=batch_size)


def _device(cfg: SupernetTrainConfig) -> torch.device:
    import torch

    if cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise ConfigError("supernet.device: cuda, but torch sees no CUDA device")
        return torch.device("cuda")
    return torch.device("cpu")


def _cosine(step: int, total: int, peak: float) -> float:
    return 0.5 * peak * (1.0 + math.cos(math.pi * min(step, total) / max(total, 1)))


def resolved(cfg: SupernetTrainConfig) -> dict[str, Any]:
    """The config as plain JSON (what a resumed run is compared against)."""
    return json.loads(cfg.model_dump_json())


#: What a supernet training writes into its folder (a run killed before its first checkpoint leaves some of them).
RUN_FILES = frozenset({"supernet.json", "curves.csv", "curves.png", "checkpoint", "checkpoint.old"})


def _check_fresh_folder(out: Path, config: dict[str, Any]) -> None:
    """Refuse to start a run in a folder that holds anything but the files an earlier start of this very config
    wrote (naming them): nothing of the user's is replaced."""
    names = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    foreign = [n for n in names if n not in RUN_FILES]
    same = True
    if "supernet.json" in names:
        try:
            same = not differences(json.loads((out / "supernet.json").read_text()), config)
        except (OSError, ValueError):
            same = False
    if foreign or not same:
        shown = ", ".join((foreign or ["supernet.json"])[:3])
        raise OutputExists(f"{out} already holds other files ({shown}{', ...' if len(foreign) > 3 else ''}"
                           f"{'' if foreign else ' of another config'}); choose an empty or new output folder")


def train_supernet(cfg: SupernetTrainConfig, out_dir: str | Path, *, resume: bool = False,
                   on_step: Callable[[StepEvent], None] | None = None,
                   on_epoch: Callable[[dict[str, Any]], None] | None = None,
                   stop_after_steps: int | None = None) -> TrainResult:
    """Train a supernet as ``cfg`` says, checkpointing into ``out_dir``.

    Args:
        cfg: The validated ``supernet:`` section.
        out_dir: The run's folder. A new run refuses a folder that already holds a checkpoint; ``resume``
            continues one, refusing a changed config (the changed keys named).
        resume: Continue the run in ``out_dir`` from its last checkpoint.
        on_step: Called after every optimiser step (progress display).
        on_epoch: Called with each epoch's curve row.
        stop_after_steps: Stop (after checkpointing) once this many steps of this call have run (tests,
            interruption drills).

    Raises:
        ConfigError: A bad config, a folder that holds another run, a changed config on resume.
        TrainingDiverged: A non-finite loss (names phase, epoch and step; the last good checkpoint is kept).
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise OutputExists(f"{out} is a file, not a folder: a supernet training writes a folder (its checkpoint, "
                           "config and curves); give --out a new or empty folder")
    # every check before anything is made; then again under the lock, where no other process can move the run on
    _check_output_folder(cfg, out, load_training_state(out) if out.is_dir() else None, resume=resume)
    check_folder_writable(out / "supernet.json")
    # built before the folder is made: a phase the supernet lacks, a dataset too small, is refused with nothing made
    training = _Training(cfg, out, on_step=on_step, on_epoch=on_epoch, stop_after_steps=stop_after_steps)
    out.mkdir(parents=True, exist_ok=True)
    with FolderLock(out, why="two trainings would both write its checkpoints"):
        previous = load_training_state(out)
        _check_output_folder(cfg, out, previous, resume=resume)
        if previous is not None:
            training.restore(previous)
            if training.finished():  # nothing to train; the curves as the last epoch left them (a kill may
                training.write_curves()  # have come between its checkpoint and its plot)
                return TrainResult(out, previous[0], training.curves, training.elapsed(), training.global_step,
                                   already_finished=True)
        else:
            atomic_write(out / "supernet.json", json.dumps(resolved(cfg), indent=1))
        return training.run(fresh=previous is None)


def _check_output_folder(cfg: SupernetTrainConfig, out: Path, previous: Any, *, resume: bool) -> None:
    """Refuse a new run into a folder that holds one (or other files), a resume with nothing to resume, and a
    resume under a changed config."""
    config_file = out / "supernet.json"
    if previous is not None and not resume:
        raise ConfigError(f"{out} already holds a supernet training run; pass --resume to continue it, or choose "
                          f"another output folder")
    if resume and previous is None:
        raise ConfigError(f"{out}: no checkpoint to resume from")
    if previous is None and out.is_dir():  # a new run: only into an empty folder, or one this config began
        _check_fresh_folder(out, resolved(cfg))
    if resume:
        try:
            earlier = json.loads(config_file.read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{config_file}: cannot read the run's config ({exc})") from None
        changed = [k for k in differences(earlier, resolved(cfg)) if k.split(".")[0] not in RESUMABLE_CHANGES]
        if changed:
            raise ConfigError(f"{out}: the config changed since this run started ({', '.join(changed)}); resuming "
                              f"would mix two trainings. Restore those keys, or start a new run in another folder")


def _optimizer(cfg: OptimizerConfig, params: list[Any]) -> Any:
    """The optimiser of the shared weights."""
    import torch

    if cfg.name == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, nesterov=cfg.momentum > 0,
                               weight_decay=cfg.weight_decay)
    return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)


@dataclass
class _Phase:
    """What a phase's steps share: its config, peak learning rate, length in steps, and the sandwich's ends."""

    config: PhaseConfig
    peak: float
    total: int
    largest: Architecture
    smallest: Architecture


class _Training:
    """One call of :func:`train_supernet`: the supernet, data, optimiser and generators, and where the training is
    (phase, epoch, step), which a checkpoint keeps and :meth:`restore` takes back.

    Built in the order a run draws from its generators (the supernet's initial weights first), so that a resumed
    run continues with the same batches and subnets.
    """

    def __init__(self, cfg: SupernetTrainConfig, out: Path, *, on_step: Callable[[StepEvent], None] | None,
                 on_epoch: Callable[[dict[str, Any]], None] | None, stop_after_steps: int | None) -> None:
        import torch

        self.cfg, self.out = cfg, out
        self.on_step, self.on_epoch, self.stop_after_steps = on_step, on_epoch, stop_after_steps
        self.space, self.supernet, source, resolution = build_parts(cfg)
        self.plan = phase_plan(cfg, self.supernet)
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        self.device = _device(cfg)
        self.supernet.to(self.device)
        self.use_amp = cfg.amp and self.device.type == "cuda"
        self.channels_last = cfg.channels_last and self.device.type == "cuda"
        if self.channels_last:
            self.supernet.to(memory_format=torch.channels_last)
        self.data = source(resolution)
        self.xtr, self.ytr = torch.from_numpy(self.data.x_train), torch.from_numpy(self.data.y_train)
        self.n = len(self.xtr)
        self.steps_per_epoch = max(1, self.n // cfg.batch_size)  # BatchNorm needs full batches: no partial one
        self.params = [p for p in self.supernet.parameters() if p.requires_grad]
        self.opt = _optimizer(cfg.optimizer, self.params)
        self.rng = np.random.default_rng(cfg.seed)
        self.gen = torch.Generator().manual_seed(cfg.seed + 1)
        torch.manual_seed(cfg.seed + 2)  # dropout and drop-path draw from torch's global generator
        self.phase_i, self.epoch, self.step, self.global_step = 0, 0, 0, 0
        self.curves: list[dict[str, Any]] = []
        self.perm: torch.Tensor | None = None
        self.seconds = 0.0  # of the earlier calls (a resumed run)
        self.started = time.perf_counter()
        self.ran = 0  # steps of this call
        self.last_ck = out / "checkpoint"

    def restore(self, previous: Any) -> None:
        """Continue from the last checkpoint (``load_training_state``'s answer)."""
        import torch
        from safetensors.torch import load_file

        ck, trainer, state = previous
        weights = ck / WEIGHTS
        check_identity(read_identity(weights), identity_of(self.supernet), str(weights))  # foreign weights: named
        try:
            tensors = load_file(str(weights), device=str(self.device))
            missing = sorted(set(self.supernet.state_dict()) ^ set(tensors))
            if missing:
                raise ValueError(f"the weights do not fit the supernet (e.g. {missing[0]})")
            self.supernet.load_state_dict(tensors)
        except Exception as exc:  # a torn or foreign file: one located line
            raise ConfigError(f"{weights}: cannot resume from these weights ({' '.join(str(exc).split())[:200]})"
                              ) from None
        try:
            self.opt.load_state_dict(trainer["optimizer"])
            self.gen.set_state(trainer["generator"])
            torch.set_rng_state(trainer["torch_rng"])
            self.perm = trainer.get("perm")
            self.rng.bit_generator.state = state["numpy_rng"]
            self.phase_i, self.epoch, self.step = int(state["phase"]), int(state["epoch"]), int(state["step"])
            self.global_step = int(state["global_step"])
            self.curves, self.seconds = list(state["curves"]), float(state["seconds"])
            if not 0 <= self.phase_i <= len(self.plan):
                raise ValueError(f"phase {self.phase_i} of a plan of {len(self.plan)}")
        except Exception as exc:  # a state of another training, or edited: one located line
            raise ConfigError(f"{ck}: not a checkpoint this training can resume from "
                              f"({type(exc).__name__}: {' '.join(str(exc).split())[:200]})") from None
        log.info("resuming %s at phase %d epoch %d step %d", self.out, self.phase_i, self.epoch, self.step)

    def write_curves(self) -> None:
        """curves.csv and curves.png of the epochs so far."""
        write_curves(self.out, self.curves, title=f"supernet {self.cfg.name}: {self.cfg.space.name} on "
                     f"{self.cfg.dataset.name} (top-1 on the held-out split)")

    def finished(self) -> bool:
        """Whether every phase of the plan has run to its end (a resume has nothing to train)."""
        if self.phase_i >= len(self.plan):
            return True
        return (self.phase_i == len(self.plan) - 1 and self.epoch >= self.plan[-1].epochs and self.step == 0)

    def elapsed(self) -> float:
        """Training seconds, earlier calls included."""
        return self.seconds + time.perf_counter() - self.started

    def checkpoint(self) -> Path:
        """Write a checkpoint of the weights, the optimiser, the generators and the position; its folder."""
        import torch

        state = {"phase": self.phase_i, "epoch": self.epoch, "step": self.step, "global_step": self.global_step,
                 "numpy_rng": self.rng.bit_generator.state, "curves": self.curves, "seconds": self.elapsed()}
        trainer = {"optimizer": self.opt.state_dict(), "generator": self.gen.get_state(),
                   "torch_rng": torch.get_rng_state()}
        if self.perm is not None:
            trainer["perm"] = self.perm
        return save_checkpoint(self.out, self.supernet, trainer=trainer, state=state,
                               dataset=json.loads(self.cfg.dataset.model_dump_json()))

    def run(self, *, fresh: bool) -> TrainResult:
        """Phase after phase from where the training is; stops early after ``stop_after_steps`` steps."""
        self.started = time.perf_counter()
        if fresh:
            self.last_ck = self.checkpoint()  # the initial weights: there is always a last good checkpoint
        while self.phase_i < len(self.plan):
            if self._run_phase(self._begin_phase(self.plan[self.phase_i])):
                break
            self.phase_i, self.epoch, self.step = self.phase_i + 1, 0, 0
            if self.phase_i < len(self.plan):
                self.last_ck = self.checkpoint()
        return TrainResult(self.out, self.last_ck, self.curves, self.elapsed(), self.global_step)

    def _begin_phase(self, ph: PhaseConfig) -> _Phase:
        """The phase's setting up (at its start: the supernet's ``begin_phase``, the momentum reset)."""
        if self.epoch == 0 and self.step == 0:
            self.supernet.begin_phase(ph.phase)
            self.opt.state.clear()  # momentum restarts with the phase (begin_phase may have permuted channels)
        peak = ph.lr if ph.lr is not None else self.cfg.optimizer.lr
        # the teacher: the largest subnet (a few-shot supernet's split phase: the largest of the phase's group)
        largest = (self.supernet.largest_in(ph.phase) if hasattr(self.supernet, "largest_in")
                   else self.supernet.largest())
        return _Phase(ph, peak, ph.epochs * self.steps_per_epoch, largest, self.supernet.smallest(ph.phase))

    def _run_phase(self, phase: _Phase) -> bool:
        """The phase's remaining epochs; True when stopped after ``stop_after_steps`` steps."""
        import torch

        while self.epoch < phase.config.epochs:
            if self.step == 0 or self.perm is None:
                self.perm = torch.randperm(self.n, generator=self.gen)
            self.supernet.train()
            while self.step < self.steps_per_epoch:
                loss = self._train_step(phase)
                self.step += 1
                self.global_step += 1
                self.ran += 1
                if self.on_step:
                    self.on_step(StepEvent(phase.config.phase, self.phase_i, self.epoch, phase.config.epochs,
                                           self.step, self.steps_per_epoch, loss))
                if self.step % self.cfg.checkpoint_every == 0 and self.step < self.steps_per_epoch:
                    self.last_ck = self.checkpoint()
                if self.stop_after_steps is not None and self.ran >= self.stop_after_steps:
                    self.last_ck = self.checkpoint()
                    return True
            self._end_epoch(phase)
        return False

    def _train_step(self, phase: _Phase) -> float:
        """One optimiser step of the sandwich rule on the next batch; the mean loss of its subnets.

        Raises:
            TrainingDiverged: A subnet's loss is not finite.
        """
        import torch
        import torch.nn.functional as F

        cfg, step = self.cfg, self.step
        lr = _cosine(self.epoch * self.steps_per_epoch + step, phase.total, phase.peak)
        for group in self.opt.param_groups:
            group["lr"] = lr
        assert self.perm is not None
        idx = self.perm[step * cfg.batch_size:(step + 1) * cfg.batch_size]
        xb, yb = self.xtr[idx].to(self.device), self.ytr[idx].to(self.device)
        if self.channels_last:
            xb = xb.contiguous(memory_format=torch.channels_last)
        archs = [phase.largest] + ([phase.smallest] if phase.smallest != phase.largest else [])
        archs += [self.supernet.sample_subnet(self.rng, phase.config.phase) for _ in range(cfg.random_subnets)]
        self.opt.zero_grad(set_to_none=True)
        teacher: torch.Tensor | None = None
        total_loss = 0.0
        for i, arch in enumerate(archs):
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.use_amp):
                logits = self.supernet(resize_for(self.space, arch, xb), arch).float()
            loss = F.cross_entropy(logits, yb, label_smoothing=cfg.label_smoothing)
            if i == 0:
                teacher = logits.detach()
            elif cfg.distill_weight > 0 and teacher is not None:
                t = cfg.distill_temperature
                kd = F.kl_div(F.log_softmax(logits / t, 1), F.softmax(teacher / t, 1), reduction="batchmean") * t * t
                loss = loss + cfg.distill_weight * kd
            if not bool(torch.isfinite(loss)):
                raise TrainingDiverged(
                    f"supernet training: non-finite loss ({float(loss.detach())}) in phase {phase.config.phase} "
                    f"epoch {self.epoch + 1} step {step + 1} (global step {self.global_step + 1}, subnet "
                    f"{arch.arch_id}); the last good checkpoint is kept: {self.last_ck}")
            loss.backward()
            total_loss += float(loss.detach())
        if cfg.optimizer.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.params, cfg.optimizer.grad_clip)
        self.opt.step()
        return total_loss / len(archs)

    def _end_epoch(self, phase: _Phase) -> None:
        """The epoch's curve row (largest and smallest subnets on the held-out split), a checkpoint, the plot."""
        row = _evaluate(self.cfg, self.supernet, self.data, phase.config.phase, self.phase_i, self.epoch,
                        self.global_step, phase.largest, _curve_smallest(self.supernet, self.plan, phase.config.phase),
                        self.elapsed())
        self.curves.append(row)
        self.epoch, self.step = self.epoch + 1, 0
        self.perm = None
        self.last_ck = self.checkpoint()
        self.write_curves()
        if self.on_epoch:
            self.on_epoch(row)


def _curve_smallest(supernet: TrainableSupernet, plan: Sequence[PhaseConfig], phase: str) -> Architecture:
    """The smallest subnet the curves follow: of the last one-shot phase; in a few-shot split phase, its group's."""
    from hwnas.supernet.fewshot import is_split_phase

    if is_split_phase(phase):
        return supernet.smallest(phase)
    return supernet.smallest([ph.phase for ph in plan if not is_split_phase(ph.phase)][-1])


def _evaluate(cfg: SupernetTrainConfig, supernet: Supernet, data: ImageData, phase: str, phase_i: int, epoch: int,
              global_step: int, largest: Architecture, smallest: Architecture, seconds: float) -> dict[str, Any]:
    row: dict[str, Any] = {"phase": phase, "phase_index": phase_i, "epoch": epoch + 1, "step": global_step}
    for label, arch in (("largest", largest), ("smallest", smallest)):
        top1, loss = score_subnet(supernet, arch, data, calib_images=cfg.calib_images, eval_images=cfg.eval_images)
        row[f"{label}_top1"], row[f"{label}_loss"] = round(top1, 5), round(loss, 5)
    row["seconds"] = round(seconds, 1)
    log.debug("phase %s epoch %d: largest %.4f smallest %.4f", phase, epoch + 1, row["largest_top1"],
             row["smallest_top1"])
    return row


CURVE_FIELDS = ("phase", "phase_index", "epoch", "step", "largest_top1", "largest_loss", "smallest_top1",
                "smallest_loss", "seconds")


def write_curves(out: Path, curves: Sequence[dict[str, Any]], *, title: str = "supernet training") -> None:
    """``curves.csv`` and ``curves.png`` (held-out top-1 of the largest and smallest subnet per epoch)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(CURVE_FIELDS))
    w.writeheader()
    for row in curves:
        w.writerow({k: row.get(k) for k in CURVE_FIELDS})
    atomic_write(out / "curves.csv", buf.getvalue())
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.6))
    x = list(range(1, len(curves) + 1))
    for label, style in (("largest", "-o"), ("smallest", "-s")):
        a1.plot(x, [100 * r[f"{label}_top1"] for r in curves], style, label=f"{label} subnet", ms=3)
        a2.plot(x, [r[f"{label}_loss"] for r in curves], style, label=f"{label} subnet", ms=3)
    for ax in (a1, a2):
        starts = [i + 1 for i, r in enumerate(curves) if i == 0 or r["phase"] != curves[i - 1]["phase"]]
        for s in starts:
            ax.axvline(s - 0.5, color="grey", lw=0.6, ls=":")
            ax.text(s - 0.4, ax.get_ylim()[1], curves[s - 1]["phase"], fontsize=7, va="top", color="grey")
        ax.set_xlabel("epoch (all phases)")
        ax.legend(fontsize=8)
    a1.set_ylabel("held-out top-1 (%), BN recalibrated")
    a2.set_ylabel("held-out cross-entropy")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    buf_png = io.BytesIO()
    fig.savefig(buf_png, format="png", dpi=110)
    plt.close(fig)
    atomic_write(out / "curves.png", buf_png.getvalue())
