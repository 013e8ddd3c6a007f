"""Training: one config object, one loop.

`train(cfg, run_dir)` writes into run_dir: config.json, metrics.csv (one row per logged step, every
loss term) and checkpoints/step-NNNNNN.pt + checkpoints/latest.pt (model, optimizer, scheduler,
config, step, data position, RNG states). If run_dir already holds latest.pt the run continues from
it, and gives the same result as an uninterrupted run (on the CPU; on CUDA cuDNN's autotuned kernels may
differ between processes).

Data: the examples are split by game, copied compact to the device once, and expanded per batch
there. Batches come from a permutation drawn by a torch.Generator seeded from (seed, epoch), so the
data position is (epoch, batch index in the epoch). Incomplete last batches are dropped.

metrics.csv: step (optimiser steps done), epoch (steps / batches per epoch, fractional), samples,
time_s (wall time, across resumptions), split ("train": means over the steps since the last train
row; "test": means over the whole test set, eval mode), lr (of the last step), samples_per_s
(training, or evaluation for test rows), loss (the total) and its terms won, cleared, duration,
moves, reg.

GPU: bf16 autocast, channels_last (the CPU too), optional torch.compile. The loop never waits for the device
between steps: loss terms stay on the device and are read every log_every steps, and so is the
non-finite check ("stop" mode; "skip" mode must read the loss every step to decide).

Regularisation c‖θ‖² (NetConfig.reg) is a term of the loss (the design's form), for either
optimiser; the optimisers apply no weight decay of their own.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from drmario.engine.rules import placement_mass
from drmario.files import MetricsCSV, lock_run_dir, write_atomic
from drmario.learn.checkpoint import (
    LEGACY_NET,
    CheckpointError,
    checkpoint_config,
    load_state,
    prune_steps,
    read_checkpoint,
    save_checkpoint,
    step_checkpoints,
)
from drmario.learn.dataset import Batch, DeviceExamples, ExampleSet, load_examples
from drmario.learn.device import resolve_device
from drmario.learn.encode import EXPERT_PLANES, N_PLANES
from drmario.learn.loss import loss_terms, total_loss, weight_norm2
from drmario.learn.net import DrMarioNet, NetConfig
from drmario.learn.player import Player, Prediction
from drmario.progress import tqdm
from drmario.settings import Settings, setting

COLUMNS: tuple[str, ...] = ("step", "epoch", "samples", "time_s", "split", "lr", "samples_per_s")
COLUMNS += ("loss", "won", "cleared", "duration", "moves", "reg")
TERMS = ("total", "won", "cleared", "duration", "moves", "reg", "future", "next", "outcome")  # the on-device vectors


def aux_columns(net: NetConfig) -> tuple[str, ...]:
    """The optional outputs' metrics columns: each logged only by a network with its head."""
    heads = ("future", net.future_pills), ("next", net.next_move_weight), ("outcome", net.outcome_values)
    return tuple(name for name, has in heads if has)


# config fields that may change between a run and its resumption without a warning
RESUMABLE = {
    "steps",
    "eval_every",
    "checkpoint_every",
    "keep_checkpoints",
    "log_every",
    "progress",
    "device",
    "compile",
}


@dataclass(frozen=True)
class TrainConfig(Settings):
    """Everything a training run needs (saved as run_dir/config.json and in every checkpoint)."""

    data: list[str] = setting([], "example files or folders (JSON Lines); or pass examples to train()")
    augment: bool = setting(False, "add the 5 other colour renamings of every example (6x the data)")
    test_fraction: float = setting(0.1, "share of games held out for the test rows", ge=0, lt=1)
    seed: int = setting(0, "initialisation, train/test split and batch order", ge=0)
    net: NetConfig = setting(NetConfig(), "the network")
    init: str | None = setting(
        None, "a network checkpoint whose weights start the training (a warm start); None: fresh weights"
    )
    learn: Literal["all", "values"] = setting(
        "all",
        "all: every weight learns; values: only the value head (won, cleared, duration) learns, init's trunk and "
        "moves head stay frozen (the moves output is init's exactly): the values refitted on games the network "
        "never saw, as AlphaGo trained its value network on one position per game, since a network learns each "
        "game's outcome by heart from many positions of it",
    )
    optimizer: Literal["sgd", "adamw"] = setting(
        "adamw",
        "adamw (every profile's) or sgd (momentum 0.9, Nesterov; bench/net.py times the design network with it)",
    )
    lr: float = setting(0.002, "peak learning rate (the cpu profile's; sgd wants about 0.02)", gt=0, le=10)
    betas: tuple[float, float] = setting((0.9, 0.999), "adamw betas", ge=0, lt=1)
    schedule: Literal["constant", "cosine"] = setting(
        "cosine", "learning rate after the warm-up: cosine to 0 over the steps (every profile's), or constant"
    )
    warmup_steps: int = setting(0, "steps of linear learning-rate warm-up", ge=0)
    batch_size: int = setting(256, "examples per optimiser step", ge=1, le=1 << 20)
    steps: int = setting(1000, "optimiser steps in all (a resumed run continues up to this)", ge=1, le=10**8)
    log_every: int = setting(20, "steps per train row of metrics.csv (means over those steps)", ge=1)
    eval_every: int = setting(200, "steps per test row (the whole held-out set)", ge=1)
    checkpoint_every: int = setting(500, "steps per checkpoint", ge=1)
    keep_checkpoints: int = setting(0, "step-*.pt files kept (0: all); latest.pt is always kept", ge=0)
    device: str = setting("auto", "auto (cuda if available, else cpu), cpu, cuda or cuda:N")
    amp: bool = setting(True, "bf16 autocast (CUDA only)")
    cpu_bf16: bool = setting(
        False,
        "bf16 autocast on CPU: fast where the CPU has bf16 instructions (AMX, AVX512-BF16; the 64x6 network's "
        "training step on a 2-core Sapphire Rapids Xeon: 1,341 against 589 samples/s at batch 256, bench/net.py); "
        "emulated without them (a 2-core AMD EPYC: 21 against 274), where profiles and notebooks refuse it",
    )
    channels_last: bool = setting(
        True,
        "channels_last memory format (on the CPU too: the 128x10 network's bf16 training step at batch 1024 on a"
        " 2-core Sapphire Rapids Xeon, 265 against 174 samples/s, bench/net.py --no-channels-last)",
    )
    compile: bool = setting(False, "torch.compile the network for training (CUDA; slower to start)")
    bootstrap: float = setting(
        0.0,
        "weight of one-step bootstrapped count targets: cleared and duration targets become (1 - w) x the"
        " game's + w x (this decision's counts + the training network's prediction one decision later,"
        " in eval mode, no gradient); 0: the game's (Monte-Carlo) alone. Test rows keep the game's",
        ge=0,
        le=1,
    )
    value_share: float = setting(
        1.0,
        "share of the decisions whose won, cleared and duration targets train (the moves target trains on all): "
        "each game's decisions drawn by a hash of the game, the decision and seed (`ExampleSet.position_keys`), the "
        "same in every round, so the value head meets few positions of any one game, as AlphaGo's value network "
        "took one per game so as not to learn each game's outcome by heart; test rows keep all. 1: every decision. "
        "At 0.1 a cpu loop's won output beat the constant on held-out games in every round (1: in none after round "
        '0), but its networks played no better (bench/README.md, "Fewer positions per game for the values")',
        gt=0,
        le=1,
    )
    expert_plane_dropout: float = setting(
        0.0,
        "with 28 planes: the share of training examples whose 4 one-ply planes are zeroed, so that the network"
        " also learns the board rather than copying them (drawn from seed and step: a resumed run draws the same;"
        " test rows keep them)",
        ge=0,
        le=1,
    )
    grad_clip: float = setting(0.0, "max global gradient norm (0: off)", ge=0)
    on_nonfinite: Literal["stop", "skip"] = setting(
        "stop", "a non-finite loss or gradient: stop cleanly and say where, or skip the step (counted)"
    )
    max_skips: int = setting(100, "skip mode: stop after this many skipped steps", ge=0)
    progress: bool = setting(True, "show a progress bar")

    def check(self) -> list[str]:
        problems = []
        if self.learn == "values" and self.init is None:
            problems.append("learn = values: needs init, the network whose values are refitted")
        if self.learn == "values" and self.net.head == "design":
            problems.append("learn = values: head 'design' is one layer shared by the moves and the values")
        if self.learn == "values" and (self.net.future_pills or self.net.next_move_weight):
            problems.append(
                "learn = values: the auxiliary heads stay frozen, so their targets would train nothing "
                f"(net.future_pills = {self.net.future_pills}, net.next_move_weight = {self.net.next_move_weight}): "
                "set both to 0 (the warm start drops those heads)"
            )
        if self.expert_plane_dropout and self.net.planes != EXPERT_PLANES:
            problems.append(f"expert_plane_dropout: needs net.planes = {EXPERT_PLANES} (not {self.net.planes})")
        return problems

    @classmethod
    def load(cls, path: str | Path) -> TrainConfig:
        return cls.from_dict(json.loads(Path(path).read_text()))


@dataclass
class TrainResult:
    """What a training run did (`train` command and 02 save it as train_result.json)."""

    step: int  # steps done
    train: dict[str, float]  # the last train row's loss terms (loss, won, cleared, duration, moves, reg)
    test: dict[str, float]  # the last test row's ({} without a test set)
    run_dir: Path
    metrics: Path  # metrics.csv
    checkpoint: Path | None  # latest.pt
    n_train: int = 0
    n_test: int = 0
    skipped: int = 0  # steps skipped for a non-finite loss or gradient
    stopped: str | None = None  # why training stopped early, or None


def init_distributed(device: torch.device) -> tuple[int, int]:
    """(rank, world size). Under torchrun (WORLD_SIZE > 1) this joins the process group: NCCL on
    GPUs (one per process, by LOCAL_RANK), gloo when training on CPUs (also on a machine with a GPU)."""
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        if device.type == "cuda":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)


def make_optimizer(net: torch.nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    """The optimiser of the weights that learn (all but frozen ones)."""
    weights = [p for p in net.parameters() if p.requires_grad]
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(weights, lr=cfg.lr, momentum=0.9, nesterov=True)
    return torch.optim.AdamW(weights, lr=cfg.lr, betas=cfg.betas, weight_decay=0.0)  # c‖θ‖² is in the loss


def lr_factor(step: int, cfg: TrainConfig) -> float:
    """Multiplier of cfg.lr for the step after `step` steps."""
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    t = step - cfg.warmup_steps
    if cfg.schedule == "cosine":
        p = min(1.0, t / max(1, cfg.steps - cfg.warmup_steps))
        return 0.5 * (1 + math.cos(math.pi * p))
    return 1.0


def uses_bf16(device: torch.device, cfg: TrainConfig) -> bool:
    """Whether training on device runs under bf16 autocast (`amp` on CUDA, `cpu_bf16` on the CPU)."""
    return (device.type == "cuda" and cfg.amp) or (device.type == "cpu" and cfg.cpu_bf16)


def autocast(device: torch.device, cfg: TrainConfig) -> contextlib.AbstractContextManager:
    if uses_bf16(device, cfg):
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def forward_backward(
    net: torch.nn.Module, batch: Batch, cfg: TrainConfig, model: DrMarioNet, device: torch.device
) -> torch.Tensor:
    """Forward and backward of one batch (net may be model compiled). Returns the loss terms
    float[len(TERMS)] in TERMS order, detached, still on the device."""
    planes = batch.planes
    if cfg.channels_last:
        planes = planes.contiguous(memory_format=torch.channels_last)
    with autocast(device, cfg):
        out = net(planes)
    terms = loss_terms(out, batch, cfg.net, model)
    terms["total"].backward()
    return torch.stack([terms[t] for t in TERMS]).detach()


@torch.no_grad()
def bootstrapped(
    model: DrMarioNet,
    batch: Batch,
    examples: DeviceExamples,
    indices: torch.Tensor,
    cfg: TrainConfig,
    device: torch.device,
) -> Batch:
    """batch with its cleared and duration targets mixed with one-step bootstrapped ones
    (`TrainConfig.bootstrap`): this decision's counts (its targets less the next decision's) plus
    the model's prediction at the next decision of the same game (`DeviceExamples.next_index`; where
    the game ended the targets stay the game's). indices int64[B]: batch's examples in examples. Only
    the later decisions' planes and counts are built, not whole batches."""
    later = examples.next_index[indices]  # the same game's next decision (-1: it ended)
    has_next, at = later >= 0, later.clamp(min=0)
    was_training = model.training
    model.eval()  # batch norm's running statistics: the targets do not move with the batch
    with autocast(device, cfg):
        out = model(examples.planes(at))
    model.train(was_training)
    w = cfg.bootstrap

    def mix(target: torch.Tensor, later_target: torch.Tensor, later_prediction: torch.Tensor) -> torch.Tensor:
        # (1 - w) target + w (target - later_target + later_prediction), written as one correction
        return torch.where(has_next, target + w * (later_prediction.float() - later_target), target)

    return batch._replace(
        cleared=mix(batch.cleared, examples.cleared[at], out.cleared),
        duration=mix(batch.duration, examples.duration[at], out.duration),
    )


@torch.no_grad()
def evaluate(model: DrMarioNet, examples: DeviceExamples, cfg: TrainConfig, device: torch.device) -> torch.Tensor:
    """Mean loss terms over all examples (eval mode), float[len(TERMS)] in TERMS order on the device
    (the auxiliary terms future and next: the mean over the examples that have their target)."""
    was_training = model.training
    model.eval()
    # won, cleared, duration, moves, outcome (x examples); future, next (x examples with their target)
    sums = torch.zeros(7, device=device)
    n, known = len(examples), torch.zeros(2, device=device)
    main = ("won", "cleared", "duration", "moves", "outcome")
    for s in range(0, n, cfg.batch_size):
        batch = examples.batch(torch.arange(s, min(s + cfg.batch_size, n), device=device))
        planes = batch.planes
        if cfg.channels_last:
            planes = planes.contiguous(memory_format=torch.channels_last)
        with autocast(device, cfg):
            out = model(planes)
        t = loss_terms(out, batch, cfg.net)
        sums[:5] += torch.stack([t[term] for term in main]) * len(batch.won)
        for i, (term, has) in enumerate((("future", batch.future_known), ("next", batch.next_known))):
            if has is not None:  # summed on the device: no host sync per batch
                with_target = has.sum()
                sums[5 + i] += t[term] * with_target
                known[i] += with_target
    model.train(was_training)
    means = sums[:5] / max(n, 1)
    aux = sums[5:] / known.clamp(min=1)
    reg = cfg.net.reg * weight_norm2(model)
    won, cleared, duration, moves, outcome = means
    total = total_loss(won, cleared, duration, moves, reg, cfg.net, aux[0], aux[1], outcome)
    return torch.cat([total[None], means[:4], reg[None], aux, outcome[None]])


def drop_expert_planes(batch: Batch, share: float, seed: int, step: int) -> None:
    """Zero the one-ply planes (the last 4 of 28) of a share of the batch's examples, in place; which
    ones is drawn from (seed, step) alone, so a resumed run draws the same (and each DDP process the
    same pattern over its own examples)."""
    drop = torch.rand(len(batch.won), generator=_generator(seed, step, 1)) < share
    batch.planes[drop.to(batch.planes.device), N_PLANES:] = 0


def _generator(*entropy: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(np.random.SeedSequence(entropy).generate_state(1, np.uint64)[0]))


def _permutation(n: int, seed: int, epoch: int, device: torch.device) -> torch.Tensor:
    return torch.randperm(n, generator=_generator(seed, epoch)).to(device)


def _last_rows(metrics: MetricsCSV) -> tuple[dict[str, float], dict[str, float]]:
    """The loss terms of the last train and test rows of metrics.csv ({} where there are none)."""
    last: dict[str, dict[str, float]] = {"train": {}, "test": {}}
    for r in metrics.rows():
        last[r["split"]] = {k: float(r[k]) for k in metrics.columns[7:]}
    return last["train"], last["test"]


def _write_checkpoint(ckpt_dir: Path, state: dict, keep: int) -> Path:
    for name in (f"step-{state['step']:06d}.pt", "latest.pt"):
        save_checkpoint(ckpt_dir / name, state)
    prune_steps(ckpt_dir, keep)
    return ckpt_dir / "latest.pt"


def _resume_from(ckpt_dir: Path) -> tuple[Path, dict] | None:
    """The newest intact checkpoint of a run: latest.pt, or if it is damaged the newest step-*.pt
    that reads and matches its digest (saying which file was skipped and which is used)."""
    candidates = [ckpt_dir / "latest.pt", *step_checkpoints(ckpt_dir)]
    damaged: list[str] = []
    for path in candidates:
        if not path.exists():
            continue
        try:
            state = read_checkpoint(path)
        except CheckpointError as e:
            damaged.append(str(e))
            continue
        if damaged:
            warnings.warn(f"{'; '.join(damaged)}; resuming from {path} instead", stacklevel=3)
        return path, state
    if damaged:
        raise CheckpointError(f"no intact checkpoint in {ckpt_dir}: {'; '.join(damaged)}")
    return None


def _check_resume(saved: dict, cfg: TrainConfig, path: Path, step: int) -> None:
    # a checkpoint from before a setting existed holds its default (`LEGACY_NET`: the network's first ones)
    a, b = {**NetConfig().to_dict(), **LEGACY_NET, **(saved.get("net") or {})}, cfg.net.to_dict()
    if a != b:
        diff = ", ".join(f"{k}: {a.get(k)!r} -> {b[k]!r}" for k in b if a.get(k) != b[k])
        raise CheckpointError(
            f"checkpoint {path} holds a run of another network ({diff}); use another run_dir or the same NetConfig"
        )
    if saved.get("learn", "all") != cfg.learn:  # the optimiser's state holds the other run's weights
        raise CheckpointError(
            f"checkpoint {path} holds a run with learn = {saved.get('learn', 'all')!r}, not {cfg.learn!r}: "
            "use another run_dir or the same setting"
        )
    new, saved = cfg.to_dict(), {**TrainConfig().to_dict(), **saved, "net": a}
    changed = [k for k in new if k not in RESUMABLE and saved.get(k) != new[k]]
    if changed:
        warnings.warn(
            f"resuming {path} with changed settings {changed}: the run will not match an uninterrupted one",
            stacklevel=3,
        )
    if cfg.schedule == "cosine" and saved.get("steps") != cfg.steps and step > cfg.warmup_steps:
        before = cfg.lr * lr_factor(step, cfg.replace(steps=saved.get("steps") or cfg.steps))
        warnings.warn(
            f"resuming {path} at step {step} with steps {saved.get('steps')} -> {cfg.steps}: the cosine schedule "
            f"now runs to step {cfg.steps}, so the learning rate goes from {before:.3g} to "
            f"{cfg.lr * lr_factor(step, cfg):.3g}",
            stacklevel=3,
        )


def _nonfinite_message(rows: torch.Tensor, steps: list[int], norms: torch.Tensor) -> str | None:
    """rows float[n, len(TERMS)] of loss terms and norms float[n] of gradient norms for steps; a
    message about the first step with a non-finite one, if any. A finite loss can still have a
    non-finite gradient (a bf16 backward overflowing), which would make every weight NaN."""
    bad = ~torch.isfinite(rows)
    bad_norm = ~torch.isfinite(norms)
    if not bad.any() and not bad_norm.any():
        return None
    i = int((bad.any(dim=1) | bad_norm).nonzero()[0, 0])
    if not bad[i].any():
        return f"step {steps[i]}: non-finite gradient norm ({float(norms[i]):.4g})"
    values = ", ".join(f"{t}={v:.4g}" for t, v, b in zip(TERMS, rows[i].tolist(), bad[i].tolist()) if b)
    return f"step {steps[i]}: non-finite loss ({values})"


class Trainer:
    """A network in training: model, optimiser, schedule and position, living in run_dir.

    Made from run_dir/checkpoints/latest.pt when there is one (the run continues), else fresh.
    `set_data` gives it examples, `run(until)` trains up to step `until`, logging and checkpointing
    as cfg says.
    """

    def __init__(self, cfg: TrainConfig, run_dir: str | Path) -> None:
        self.cfg, self.run_dir = cfg, Path(run_dir)
        self.device = device = resolve_device(cfg.device)
        self.rank, self.world = init_distributed(device)
        if cfg.batch_size % self.world:
            raise ValueError(f"batch_size {cfg.batch_size} must divide evenly over {self.world} processes")
        self.ckpt_dir = self.run_dir / "checkpoints"
        self.ckpt_dir.mkdir(parents=True, exist_ok=True)
        self.metrics_path = self.run_dir / "metrics.csv"
        self.metrics = MetricsCSV(self.metrics_path, COLUMNS + aux_columns(cfg.net), digits=7)
        self.cuda = device.type == "cuda"
        if self.cuda:
            torch.backends.cudnn.benchmark = True  # fixed batch shapes: let cuDNN pick its fastest kernels
        torch.manual_seed(cfg.seed)
        self.model = model = DrMarioNet(cfg.net).to(device)
        if cfg.learn == "values":
            model.learn_values_only()
        if cfg.channels_last:
            self.model = model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # (stubs)
        self.opt = make_optimizer(model, cfg)
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, lambda s: lr_factor(s, cfg))
        self.step, self.epoch, self.index, elapsed, self.skipped = 0, 0, 0, 0.0, 0
        self.checkpoint_path: Path | None = None
        self.open_window: dict | None = None  # a resumed run's metrics log window, from its checkpoint
        self.resumed: tuple[Path, str | None] | None = None  # the checkpoint resumed and its examples' digest
        self.data_digest: str | None = None
        resume = _resume_from(self.ckpt_dir)
        if resume is not None:
            latest, ck = resume
            _check_resume(ck.get("config", {}), cfg, latest, ck["step"])
            load_state(model, ck["model"], latest, checkpoint_config(ck, latest))
            self.opt.load_state_dict(ck["optimizer"])
            self.sched.load_state_dict(ck["scheduler"])
            # the settings' rate and betas, not the checkpoint's (which the two loads bring back): a change
            # the warning above names takes effect
            self.sched.base_lrs = [cfg.lr] * len(self.opt.param_groups)
            for group in self.opt.param_groups:
                group["initial_lr"], group["lr"] = cfg.lr, cfg.lr * lr_factor(ck["step"], cfg)
                if "betas" in group:
                    group["betas"] = tuple(cfg.betas)
            self.step, elapsed, self.skipped = ck["step"], ck["time_s"], ck["skipped"]
            self.resumed = (latest, ck.get("data_digest"))
            self.open_window = ck.get("window")
            self.epoch, self.index = ck["position"]["epoch"], ck["position"]["index"]
            torch.set_rng_state(ck["rng"]["torch"])
            if self.cuda and ck["rng"]["cuda"]:
                torch.cuda.set_rng_state_all(ck["rng"]["cuda"])
            if latest.name != "latest.pt" and self.rank == 0:
                # killed between a step file and latest.pt (or latest.pt damaged): latest.pt is the run's
                # network for whoever reads it, so it is restored now, not only at the next checkpoint
                latest = save_checkpoint(self.ckpt_dir / "latest.pt", ck)
            self.checkpoint_path = latest
        elif cfg.init:  # a warm start: the weights of another run's network, a fresh optimiser
            start = read_checkpoint(cfg.init, fallback=True)  # a damaged latest.pt: its newest intact step
            # the auxiliary heads are training's alone, and the outcome values a refit may add: a warm start may
            # add them (fresh) or drop them
            optional = ("future_conv.", "next_move_conv.", "outcome_fc.")
            load_state(model, start["model"], cfg.init, checkpoint_config(start, cfg.init), optional=optional)
        self.checkpoint_step = self.step
        if self.rank == 0:
            # rows logged after the checkpoint are redone (from scratch: all of them, a warm start's step-0 row too)
            self.metrics.truncate(self.step if self.step else -1)
            write_atomic(self.run_dir / "config.json", json.dumps(cfg.to_dict(), indent=2) + "\n")
        net: torch.nn.Module = model
        if self.world > 1:
            # Every process takes its share of each batch; gradients are averaged across them.
            # Batch norms use each process's share for their statistics (no SyncBatchNorm).
            from torch.nn.parallel import DistributedDataParallel

            net = DistributedDataParallel(model, device_ids=[device.index] if self.cuda else None)
        self.net: torch.nn.Module = torch.compile(net) if cfg.compile else net  # type: ignore[assignment]  # (stubs)
        model.train()
        self.t0 = time.perf_counter() - elapsed
        self.last_train, self.last_test = _last_rows(self.metrics)  # a finished run returns its results
        self.train_dev: DeviceExamples | None = None
        self.test_dev: DeviceExamples | None = None
        self.n_train = self.n_test = 0

    def set_data(self, train_set: ExampleSet, test_set: ExampleSet | None = None) -> None:
        """Train on train_set (test rows from test_set)."""
        B = self.cfg.batch_size
        self.per_epoch = len(train_set) // B
        if self.per_epoch == 0:
            raise ValueError(f"batch_size {B} is larger than the training set ({len(train_set)} examples)")
        net = self.cfg.net

        def on_device(examples: ExampleSet, value_mask: np.ndarray | None = None) -> DeviceExamples:
            return examples.to_device(
                self.device,
                n_planes=net.planes,
                future_pills=net.future_pills,
                next_move=bool(net.next_move_weight),
                value_mask=value_mask,
            )

        self.data_digest = train_set.digest()
        if self.resumed is not None and self.resumed[1] not in (None, self.data_digest):
            raise CheckpointError(
                f"checkpoint {self.resumed[0]} trained on other examples than these {len(train_set):,}: its position "
                "in the batch order means nothing here; use another run_dir (init = that checkpoint: a warm start)"
            )
        share = self.cfg.value_share
        self.train_dev = on_device(train_set, train_set.position_keys(self.cfg.seed) < share if share < 1 else None)
        self.test_dev = on_device(test_set) if test_set is not None and len(test_set) else None
        self.n_train, self.n_test = len(train_set), len(test_set) if test_set is not None else 0
        self.perm = _permutation(len(train_set), self.cfg.seed, self.epoch, self.device)

    def _window(self, window: torch.Tensor, norms: torch.Tensor, steps: list[int]) -> dict:
        """The log window so far as a checkpoint keeps it: its rows (averaged over the processes, as
        logging does, so every process resumes with the same), their steps and log_every."""
        rows, n = window[: len(steps)].clone(), len(steps)
        if self.world > 1:
            torch.distributed.all_reduce(rows)
            rows /= self.world
        return {"terms": rows.cpu(), "norms": norms[:n].cpu(), "steps": list(steps), "log_every": self.cfg.log_every}

    def checkpoint(self, window: dict | None = None) -> Path | None:
        """Write step-N.pt and latest.pt (process 0 only, under torchrun), with the metrics log's
        window so far (`_window`), if given."""
        if self.rank != 0:
            return None
        cfg, cuda = self.cfg, self.cuda
        state = {
            "net_config": cfg.net.to_dict(),
            "model": self.model.state_dict(),
            "optimizer": self.opt.state_dict(),
            "scheduler": self.sched.state_dict(),
            "config": cfg.to_dict(),
            "step": self.step,
            "position": {"epoch": self.epoch, "index": self.index},
            "rng": {"torch": torch.get_rng_state(), "cuda": torch.cuda.get_rng_state_all() if cuda else []},
            "time_s": time.perf_counter() - self.t0,
            "skipped": self.skipped,
            "data_digest": self.data_digest,
            **({"window": window} if window is not None else {}),
        }
        self.checkpoint_path, self.checkpoint_step = (
            _write_checkpoint(self.ckpt_dir, state, cfg.keep_checkpoints),
            self.step,
        )
        return self.checkpoint_path

    def _row(self, split: str, terms: list[float], lr: float, rate: float) -> dict[str, float]:
        losses = {  # as written
            k: float(self.metrics.format(v)) for k, v in zip(("loss", *TERMS[1:]), terms) if k in self.metrics.columns
        }
        if self.rank != 0:
            return losses
        self.metrics.append(
            {
                "step": self.step,
                "epoch": round(self.step / self.per_epoch, 4),
                "samples": self.step * self.cfg.batch_size,
                "time_s": round(time.perf_counter() - self.t0, 3),
                "split": split,
                "lr": lr,
                "samples_per_s": round(rate, 1),
                **losses,
            },
        )
        return losses

    def _test(self, lr: float) -> None:
        """A test row: the loss terms on the whole held-out set (on rank 0; none without one)."""
        if self.rank != 0 or self.test_dev is None:
            return
        t = time.perf_counter()
        terms = evaluate(self.model, self.test_dev, self.cfg, self.device).tolist()
        self.last_test = self._row("test", terms, lr, len(self.test_dev) / max(time.perf_counter() - t, 1e-9))

    def run(self, until: int | None = None) -> TrainResult:
        """Train up to step `until` (default cfg.steps). Logs every cfg.log_every steps and at the
        end, evaluates every eval_every (and at step 0 when it starts from `init`'s weights, so the
        curves show where a warm start or a values refit began), checkpoints every checkpoint_every
        and at the end. The loop is kept whole, top to bottom, so one reading shows what a step does."""
        if self.train_dev is None:
            raise ValueError("Trainer.run needs data: call set_data first")
        cfg, device, model, opt, sched = self.cfg, self.device, self.model, self.opt, self.sched
        until = cfg.steps if until is None else until
        if self.step == 0 and cfg.init:
            self._test(opt.param_groups[0]["lr"])
        B = cfg.batch_size
        window = torch.zeros(cfg.log_every, len(TERMS), device=device)  # this log window's per-step terms
        norms = torch.zeros(cfg.log_every, device=device)  # and gradient norms
        window_steps: list[int] = []
        carried, self.open_window = self.open_window, None  # the log window its checkpoint cut, if any
        if carried and carried.get("log_every") == cfg.log_every:  # (checkpoint_every not a multiple of log_every)
            n, width = carried["terms"].shape  # a checkpoint from before the outcome term: its terms less that one
            window[:n, :width], norms[:n] = carried["terms"].to(device), carried["norms"].to(device)
            window_steps = list(carried["steps"])
        timed = len(window_steps)  # steps of the window run before window_t (not counted in samples/s)
        window_t, paused = time.perf_counter(), 0.0
        stopped = None
        bar = tqdm(total=until, initial=self.step, desc="train", disable=not cfg.progress, dynamic_ncols=True)
        while self.step < until:
            if self.index >= self.per_epoch:
                self.epoch, self.index = self.epoch + 1, 0
                self.perm = _permutation(self.n_train, cfg.seed, self.epoch, device)
            indices = self.perm[self.index * B : (self.index + 1) * B][self.rank :: self.world]
            batch = self.train_dev.batch(indices)
            if cfg.expert_plane_dropout:
                drop_expert_planes(batch, cfg.expert_plane_dropout, cfg.seed, self.step)
            if cfg.bootstrap:
                batch = bootstrapped(model, batch, self.train_dev, indices, cfg, device)
            self.index += 1
            lr = opt.param_groups[0]["lr"]
            opt.zero_grad(set_to_none=True)
            # the forward pass updates batch norm's running statistics before its loss is judged: a skip undoes it
            kept = [b.clone() for b in model.buffers()] if cfg.on_nonfinite == "skip" else []
            terms = forward_backward(self.net, batch, cfg, model, device)
            # the gradients' norm (all-reduced under DDP: every process has the same one); max inf clips nothing
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip or math.inf)
            apply = True
            if cfg.on_nonfinite == "skip":  # needs the loss on the host now: one sync per step
                ok = (torch.isfinite(terms).all() & torch.isfinite(norm)).to(torch.int32)
                if self.world > 1:  # every process skips alike (a process's own loss terms can differ)
                    torch.distributed.all_reduce(ok, op=torch.distributed.ReduceOp.MIN)
                apply = bool(ok)
            if apply:
                opt.step()
                window[len(window_steps)] = terms
                norms[len(window_steps)] = norm
                window_steps.append(self.step + 1)
            else:
                self.skipped += 1
                with torch.no_grad():
                    for buffer, before in zip(model.buffers(), kept):
                        buffer.copy_(before)
                msg = _nonfinite_message(terms[None], [self.step + 1], norm[None])
                msg = msg or f"step {self.step + 1}: non-finite in another process"
                tqdm.write(f"{msg}: step skipped ({self.skipped} so far)")
            with warnings.catch_warnings():  # a skipped first step: the schedule still counts it
                warnings.filterwarnings("ignore", re.escape("Detected call of `lr_scheduler.step()`"), UserWarning)
                sched.step()
            self.step += 1
            bar.update(1)

            step = self.step
            if self.skipped > cfg.max_skips:
                stopped = f"{self.skipped} steps skipped for a non-finite loss or gradient (max_skips={cfg.max_skips})"
            log = step % cfg.log_every == 0 or step == until
            due_eval = self.test_dev is not None and (step % cfg.eval_every == 0 or step == until)
            due_ckpt = step % cfg.checkpoint_every == 0 or step == until
            if stopped is None and (log or due_eval or due_ckpt):  # sync points: check for non-finite terms
                rows = window[: len(window_steps)]
                if self.world > 1:  # every process logs and stops alike: average the terms
                    rows = rows.clone()
                    torch.distributed.all_reduce(rows)
                    rows /= self.world
                stopped = _nonfinite_message(rows, window_steps, norms[: len(window_steps)])
                if stopped is None and log and window_steps:
                    now = time.perf_counter()
                    rate = (len(window_steps) - timed) * B / max(now - window_t - paused, 1e-9)
                    self.last_train = self._row("train", rows.mean(dim=0).tolist(), lr, rate)
                    bar.set_postfix(loss=f"{self.last_train['loss']:.4g}", lr=f"{lr:.3g}", samples_s=f"{rate:.0f}")
                    window_steps, window_t, paused, timed = [], now, 0.0, 0
            if stopped is not None:
                break
            if due_eval or due_ckpt:
                t = time.perf_counter()
                if due_eval:
                    self._test(lr)
                if due_ckpt:  # with the log window so far, which a resumed run's next row averages in
                    self.checkpoint(self._window(window, norms, window_steps))
                paused += time.perf_counter() - t
        bar.close()
        if stopped is not None:
            path = self.checkpoint_path
            where = (
                f"the last checkpoint (step {self.checkpoint_step}) is {path}" if path else "no checkpoint was written"
            )
            stopped = f"{stopped}; training stopped at step {self.step}; {where}"
            tqdm.write(stopped)
        return self.result(stopped)

    def close(self) -> None:
        """Leave the process group (under torchrun) once every process is done. The DDP wrapper goes
        first: its reducer holds the group, which would otherwise be freed (its gloo threads still
        joinable) during the interpreter's exit and abort the process ("terminate called without an
        active exception", seen once in CI)."""
        import gc

        import torch.distributed as dist

        if self.world > 1 and dist.is_initialized():
            dist.barrier()
            self.net = self.model
            gc.collect()
            dist.destroy_process_group()

    def result(self, stopped: str | None = None) -> TrainResult:
        return TrainResult(
            step=self.step,
            train=self.last_train,
            test=self.last_test,
            run_dir=self.run_dir,
            metrics=self.metrics_path,
            checkpoint=self.checkpoint_path,
            n_train=self.n_train,
            n_test=self.n_test,
            skipped=self.skipped,
            stopped=stopped,
        )


def train(cfg: TrainConfig, run_dir: str | Path, examples: ExampleSet | None = None) -> TrainResult:
    """Train (or continue training) the network of cfg.net in run_dir; see the module docstring.
    run_dir has one owner: while this runs, another trainer on it is refused at once, naming this
    one (`drmario.files.lock_run_dir`; under torchrun process 0 holds it for all)."""
    owner = lock_run_dir(run_dir, "trainer") if os.environ.get("RANK", "0") == "0" else contextlib.nullcontext()
    with owner:
        if examples is None:
            if not cfg.data:
                raise ValueError("TrainConfig.data lists no example files, and no examples were passed to train()")
            examples = load_examples(cfg.data, augment=cfg.augment, progress=cfg.progress, summary=True)
        trainer = Trainer(cfg, run_dir)
        try:
            trainer.set_data(*examples.split_by_game(cfg.test_fraction, cfg.seed))
            return trainer.run(cfg.steps)
        finally:
            trainer.close()


def steps_before(run_dir: str | Path) -> int | None:
    """The optimiser steps before a training's first: those of the checkpoint it started from
    (config.json's init) and, back along the warm starts, of the trainings that made it, to fresh
    weights (0). None where a link cannot be read: no config.json, an init that is gone, or one not
    from a training (an exported network keeps no step)."""
    total, folder = 0, Path(run_dir)
    for _ in range(1000):  # a cycle is impossible for real runs; a hand-edited config could make one
        try:
            init = json.loads((folder / "config.json").read_text()).get("init")
            if not init:
                return total
            step = read_checkpoint(init).get("step")
        except (OSError, ValueError):  # no file, damaged JSON or checkpoint (CheckpointError)
            return None
        if not isinstance(step, int) or Path(init).parent.name != "checkpoints":
            return None
        total, folder = total + step, Path(init).parent.parent
    return None


def held_out_examples(cfg: TrainConfig) -> ExampleSet:
    """The examples a training by cfg logs its test rows on: cfg.data's held-out games (test_fraction,
    seed), with their colour renamings when cfg.augment. Compare networks on these to read the
    figures beside its curves."""
    return load_examples(cfg.data, augment=cfg.augment, progress=False).split_by_game(cfg.test_fraction, cfg.seed)[1]


def move_scores(player: Player, examples: ExampleSet, chunk: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """Per example: (bool[N] whether the network's most probable legal placement (`placement_mass`)
    carries target mass, i.e. is one of the teacher's chosen moves; float64[N] the cross-entropy of the
    target under its moves output, in nats)."""
    n = len(examples)
    hits, cross_entropy = np.zeros(n, bool), np.zeros(n, np.float64)
    for start in range(0, n, chunk):
        rows = np.arange(start, min(start + chunk, n))
        part = examples.subset(rows)
        target = part.dense_moves().reshape(len(part), -1)
        moves = player.evaluate(part.cells, part.pills, part.previews, legal=part.legal()).moves
        best = placement_mass(moves, part.pills[:, 0] == part.pills[:, 1]).reshape(len(part), -1).argmax(axis=1)
        hits[rows] = target[np.arange(len(part)), best] > 0
        moves = moves.reshape(len(part), -1)
        cross_entropy[rows] = -(target * np.log(np.maximum(moves, 1e-12))).sum(axis=1)
    return hits, cross_entropy


def move_agreement(player: Player, examples: ExampleSet, chunk: int = 4096) -> tuple[float, float]:
    """How well a network imitates the targets of examples: the means of `move_scores` (the share of
    positions where its most probable legal placement is one of the teacher's chosen moves; the mean
    cross-entropy of the targets, in nats); (0, 0) without examples."""
    hits, cross_entropy = move_scores(player, examples, chunk)
    return (float(hits.mean()), float(cross_entropy.mean())) if len(examples) else (0.0, 0.0)


def value_errors(player: Player, examples: ExampleSet, pred: Prediction | None = None) -> dict[str, float]:
    """How well a network predicts what followed in examples' games (best on games it never
    trained on): the won output's mean squared error (targets -1, 1), and the root mean square
    errors of the viruses it will clear and the pills to the end; then what the search reads of a
    won game's future (its pills) and a lost one's (its viruses cleared), on the examples of that
    outcome: the outcome_values outputs, or the means over both outcomes where the network has none.
    pred: player's prediction on examples, if already made."""
    pred = player.evaluate(examples.cells, examples.pills, examples.previews) if pred is None else pred
    won = examples.won > 0
    lost = ~won
    win_pills, loss_cleared, _ = pred.by_outcome()

    def rmse(predicted: np.ndarray, target: np.ndarray) -> float:
        return float(np.sqrt(np.mean((predicted - target) ** 2))) if len(target) else float("nan")

    return {
        "won: mean squared error": float(np.mean((pred.won - examples.won) ** 2)),
        "viruses cleared: RMSE": rmse(pred.cleared, examples.cleared),
        "pills to the end: RMSE": rmse(pred.duration, examples.duration),
        "won games' pills to the end: RMSE": rmse(win_pills[won], examples.duration[won]),
        "lost games' viruses cleared: RMSE": rmse(loss_cleared[lost], examples.cleared[lost]),
    }
