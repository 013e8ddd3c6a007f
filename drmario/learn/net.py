"""The residual network of design note 000 with three heads, the loss, checkpoints, and `Player`,
the batched inference wrapper the search calls.

Heads (`NetConfig.head`):

- ``conv`` (the default, measured to generalise: bench/imitation.py): the move logits are a
  convolution of the trunk to 4 planes, one per rotation, so slot r * 128 + x * 16 + y is plane r
  at cell (x, y); the three value outputs come from a 1x1-conv projection pooled over the board
  (mean and max, as KataGo pools) and a small MLP. Nothing flattens the 4,096 trunk features.
- ``design``: the design note's single linear layer from the flattened trunk to 3 + 512 outputs.
- ``alphago``: note 001's 1x1-conv policy and value trunks, each with a linear layer.

Shapes: B = batch size. Input float[B, 18, 8, 16] planes (`encode`); outputs `NetOutput`:
won float[B] in [-1, 1], cleared and duration float[B] >= 0, moves float[B, 4, 8, 16] summing to 1
over the 512 slots (flat slot r * 128 + x * 16 + y, as `encode.move_index`).

Moves are normalised in log space: log m = s - logsumexp(s), with s = log-sigmoid(z) for the design
head (sigmoid then divided by the sum, exactly, without forming tiny products) and s = z for the
conv and alphago heads (a softmax over logits). The loss uses `NetOutput.log_moves` so the
cross-entropy stays finite whatever the logits.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

from drmario.engine import kernels as K
from drmario.engine.rules import MOVES_SHAPE, N_MOVES
from drmario.files import atomic_file
from drmario.learn.encode import N_PLANES, planes_torch
from drmario.search.searcher import Prediction
from drmario.settings import Settings, setting

CELLS = K.WIDTH * K.HEIGHT  # 128 board cells
HEADS = ("conv", "design", "alphago")
LOSS_TERMS = ("won", "cleared", "duration", "moves", "reg", "total")


class CheckpointError(ValueError):
    """A checkpoint file that cannot be read or does not fit the network asked for."""


@dataclass(frozen=True)
class NetConfig(Settings):
    """Every number of the network and its loss (defaults: design note 000)."""

    kernel: int = setting(3, "k: convolution kernel size (odd: zero padding keeps the 8x16 board)", ge=1, le=15)
    filters: int = setting(256, "f: convolution filters", ge=1, le=4096)
    blocks: int = setting(19, "r: residual blocks", ge=0, le=200)
    leak: float = setting(0.1, "l: LeakyReLU negative slope", ge=0, lt=1)
    reg: float = setting(1e-4, "c: weight of c * ||parameters||^2 in the loss", ge=0)
    head: Literal["conv", "design", "alphago"] = setting(
        "conv", "conv: convolutional moves, pooled values; design: one linear layer to 3 + 512; alphago: note 001"
    )
    policy_kernel: int = setting(1, "conv head: kernel size of the moves convolution (1 or 3)", ge=1, le=7)
    pooled_planes: int = setting(32, "conv head: 1x1-conv planes pooled (mean, max) for the values", ge=1, le=1024)
    value_hidden: int = setting(256, "conv and alphago heads: hidden units of the value MLP", ge=1, le=65536)
    policy_planes: int = setting(2, "alphago head: 1x1-conv planes before the policy layer", ge=1, le=512)
    value_planes: int = setting(1, "alphago head: 1x1-conv planes before the value trunk", ge=1, le=512)

    def check(self) -> list[str]:
        return [
            f"{name} = {k}: expected an odd size"
            for name, k in (("kernel", self.kernel), ("policy_kernel", self.policy_kernel))
            if k % 2 == 0
        ]


class NetOutput(NamedTuple):
    """Network outputs, float32 whatever the compute dtype."""

    won: torch.Tensor  # [B] in [-1, 1]
    cleared: torch.Tensor  # [B] >= 0
    duration: torch.Tensor  # [B] >= 0
    moves: torch.Tensor  # [B, 4, 8, 16], sums to 1 (0 on masked slots)
    log_moves: torch.Tensor  # [B, 4, 8, 16], log of moves computed stably (-inf on masked slots)


def heads_to_outputs(scalars: torch.Tensor, score: torch.Tensor, legal: torch.Tensor | None = None) -> NetOutput:
    """Final nonlinearities. scalars float[B, 3] (won, cleared, duration pre-activations);
    score float[B, 512] unnormalised log-probabilities; legal bool[B, 4, 8, 16] or None.

    With legal, illegal slots get probability 0 and the rest is renormalised; a row with no legal
    move at all (a finished position) keeps the unmasked distribution rather than dividing by 0.
    """
    scalars, score = scalars.float(), score.float()
    n = score.shape[0]
    if legal is not None:
        legal = legal.reshape(n, N_MOVES).bool()
        keep = legal | ~legal.any(dim=1, keepdim=True)
        score = score.masked_fill(~keep, float("-inf"))
    log_moves = score - torch.logsumexp(score, dim=1, keepdim=True)
    return NetOutput(
        won=torch.tanh(scalars[:, 0]),
        cleared=F.softplus(scalars[:, 1], beta=1, threshold=5),
        duration=F.softplus(scalars[:, 2], beta=1, threshold=5),
        moves=log_moves.exp().view(n, *MOVES_SHAPE),
        log_moves=log_moves.view(n, *MOVES_SHAPE),
    )


class ConvBN(nn.Module):
    """Convolution (zero padding, stride 1, no bias: the batch norm's shift is the bias) + batch norm.
    `fuse` folds the norm into the convolution for inference."""

    def __init__(self, cin: int, cout: int, kernel: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, padding=kernel // 2, bias=False)
        self.bn: nn.Module = nn.BatchNorm2d(cout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.conv(x))

    def fuse(self) -> None:
        if isinstance(self.bn, nn.BatchNorm2d):
            self.conv = fuse_conv_bn_eval(self.conv.eval(), self.bn.eval())
            self.bn = nn.Identity()


class Residual(nn.Module):
    """conv BN LeakyReLU conv BN, skip connection, LeakyReLU."""

    def __init__(self, filters: int, kernel: int, leak: float) -> None:
        super().__init__()
        self.a = ConvBN(filters, filters, kernel)
        self.b = ConvBN(filters, filters, kernel)
        self.leak = leak

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.leaky_relu(self.a(x), self.leak)
        return F.leaky_relu(x + self.b(y), self.leak)


class DrMarioNet(nn.Module):
    """Stem conv + r residual blocks + the configured head. forward(planes float[B, 18, 8, 16],
    legal bool[B, 4, 8, 16] | None) -> NetOutput."""

    def __init__(self, cfg: NetConfig | None = None) -> None:
        super().__init__()
        self.cfg = cfg = cfg or NetConfig()
        f = cfg.filters
        self.stem = ConvBN(N_PLANES, f, cfg.kernel)
        self.blocks = nn.Sequential(*[Residual(f, cfg.kernel, cfg.leak) for _ in range(cfg.blocks)])
        if cfg.head == "conv":
            self.policy_conv = nn.Conv2d(f, 4, cfg.policy_kernel, padding=cfg.policy_kernel // 2)
            self.pool = ConvBN(f, cfg.pooled_planes, 1)
            self.value_fc = nn.Sequential(
                nn.Linear(2 * cfg.pooled_planes, cfg.value_hidden), nn.ReLU(), nn.Linear(cfg.value_hidden, 3)
            )
        elif cfg.head == "design":
            self.head = nn.Linear(f * CELLS, 3 + N_MOVES)
        else:
            self.policy = ConvBN(f, cfg.policy_planes, 1)
            self.policy_fc = nn.Linear(cfg.policy_planes * CELLS, N_MOVES)
            self.value = ConvBN(f, cfg.value_planes, 1)
            self.value_fc = nn.Sequential(
                nn.Linear(cfg.value_planes * CELLS, cfg.value_hidden), nn.ReLU(), nn.Linear(cfg.value_hidden, 3)
            )

    def forward(self, planes: torch.Tensor, legal: torch.Tensor | None = None) -> NetOutput:
        x = self.blocks(F.leaky_relu(self.stem(planes), self.cfg.leak))  # [B, f, 8, 16]
        if self.cfg.head == "conv":
            logits = self.policy_conv(x).flatten(1)  # [B, 4 * 8 * 16]: plane r, cell (x, y)
            v = F.leaky_relu(self.pool(x), self.cfg.leak).flatten(2)  # [B, p, 128]
            scalars = self.value_fc(torch.cat([v.mean(dim=2), v.amax(dim=2)], dim=1))  # [B, 3]
            return heads_to_outputs(scalars, logits, legal)
        if self.cfg.head == "design":
            z = self.head(x.flatten(1)).float()  # [B, 3 + 512]
            return heads_to_outputs(z[:, :3], F.logsigmoid(z[:, 3:]), legal)
        logits = self.policy_fc(F.relu(self.policy(x)).flatten(1))  # [B, 512], softmax logits
        scalars = self.value_fc(F.relu(self.value(x)).flatten(1))  # [B, 3]
        return heads_to_outputs(scalars, logits, legal)

    def fuse_bn(self) -> DrMarioNet:
        """Fold every batch norm into its convolution (eval mode; the module stays fused). Returns self."""
        self.eval()
        for m in self.modules():
            if isinstance(m, ConvBN):
                m.fuse()
        return self

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def flops_per_position(cfg: NetConfig) -> int:
    """Forward FLOPs of one position: 2 per multiply-add of the convolutions and linear layers
    (batch norms, activations and the output nonlinearities are left out). Training is about 3x."""
    k2, f = cfg.kernel**2, cfg.filters
    macs = CELLS * k2 * f * (N_PLANES + 2 * cfg.blocks * f)
    if cfg.head == "conv":
        p, h = cfg.pooled_planes, cfg.value_hidden
        macs += CELLS * f * (4 * cfg.policy_kernel**2 + p) + 2 * p * h + 3 * h
    elif cfg.head == "design":
        macs += f * CELLS * (3 + N_MOVES)
    else:
        p, v = cfg.policy_planes, cfg.value_planes
        macs += CELLS * f * (p + v) + p * CELLS * N_MOVES + v * CELLS * cfg.value_hidden + cfg.value_hidden * 3
    return 2 * macs


# ------------------------------------------------------------------------------------------------
# Loss


def weight_norm2(net: nn.Module) -> torch.Tensor:
    """||parameters||^2 over every parameter (the design's regulariser names no exceptions)."""
    return torch.stack([p.float().square().sum() for p in net.parameters()]).sum()


def loss_terms(
    out: NetOutput, batch, cfg: NetConfig, net: nn.Module | None = None, *, reg_grad: bool = True
) -> dict[str, torch.Tensor]:
    """The design's loss, each term a batch mean (a scalar tensor), plus "reg" and "total".

    batch: a `dataset.Batch` (won, cleared, duration float[B], moves float[B, 4, 8, 16]).
    won: (w - ŵ)^2; cleared: ((c - ĉ) / max(c, 1))^2; duration: likewise; moves: -Σ m·log m̂;
    reg: c ||θ||^2 of net (0 without net). reg_grad=False detaches reg (the regulariser is then
    applied by the optimiser as weight decay, and reg is only reported); total = sum of all five.
    """
    won = (out.won - batch.won).square()
    cleared = ((out.cleared - batch.cleared) / batch.cleared.clamp(min=1)).square()
    duration = ((out.duration - batch.duration) / batch.duration.clamp(min=1)).square()
    # where(): a zero target times a -inf log (masked slot) is 0, not NaN (a NaN target stays NaN)
    moves = -torch.where(batch.moves != 0, batch.moves * out.log_moves, 0.0).sum(dim=(1, 2, 3))
    terms = {"won": won.mean(), "cleared": cleared.mean(), "duration": duration.mean(), "moves": moves.mean()}
    if net is None:
        reg = torch.zeros((), device=out.won.device)
    elif reg_grad:
        reg = cfg.reg * weight_norm2(net)
    else:
        with torch.no_grad():
            reg = cfg.reg * weight_norm2(net)
    terms["reg"] = reg
    terms["total"] = terms["won"] + terms["cleared"] + terms["duration"] + terms["moves"] + reg
    return terms


# ------------------------------------------------------------------------------------------------
# Checkpoints


DIGEST = "sha256"  # the checkpoint key holding the content digest


def state_digest(state: object) -> str:
    """SHA-256 of a checkpoint's content: every tensor's dtype, shape and bytes, and every other
    value's repr, walked in key order (so it is stable across saves and loads)."""
    h = hashlib.sha256()

    def walk(value: object) -> None:
        if isinstance(value, torch.Tensor):
            t = value.detach().cpu().contiguous()
            h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
        elif isinstance(value, dict):
            for key in sorted(value, key=repr):
                if key != DIGEST:
                    h.update(repr(key).encode())
                    walk(value[key])
        elif isinstance(value, (list, tuple)):
            h.update(f"L{len(value)}".encode())
            for item in value:
                walk(item)
        else:
            h.update(repr(value).encode())

    walk(state)
    return h.hexdigest()


def save_checkpoint(path: str | Path, state: dict) -> Path:
    """torch.save state, with its content digest (`state_digest`), to path atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path, "wb") as f:
        torch.save({**state, DIGEST: state_digest(state)}, f)
    return path


def load_file(path: str | Path) -> object:
    """torch.load onto the CPU, weights only (no code runs), and check the content digest if the
    file has one. FileNotFoundError if path is missing; CheckpointError naming the file if it is
    truncated or corrupted (a flipped byte in a weight changes the digest)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises several types for damaged files
        raise CheckpointError(
            f"checkpoint {path} cannot be read (truncated or corrupted?): {type(e).__name__}: {e}"
        ) from e
    if isinstance(state, dict) and DIGEST in state:
        saved = state.pop(DIGEST)
        if saved != state_digest(state):
            raise CheckpointError(f"checkpoint {path} is corrupted: its content does not match its sha256 digest")
    return state


def read_checkpoint(path: str | Path) -> dict:
    """A network checkpoint dict (`load_file`); CheckpointError if the file holds something else."""
    state = load_file(path)
    if not isinstance(state, dict) or "model" not in state or "net_config" not in state:
        keys = sorted(state) if isinstance(state, dict) else type(state).__name__
        raise CheckpointError(f"checkpoint {path} is not a drmario network checkpoint (found {keys})")
    return state


def checkpoint_config(state: dict, path: str | Path = "checkpoint") -> NetConfig:
    try:
        return NetConfig.from_dict(state["net_config"])
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"checkpoint {path}: bad network configuration: {e}") from e


def load_state(net: DrMarioNet, state_dict: dict, path: str | Path, saved: NetConfig | None = None) -> None:
    """net.load_state_dict with an error that names the file and lists what does not fit."""
    own = net.state_dict()
    missing = [k for k in own if k not in state_dict]
    unexpected = [k for k in state_dict if k not in own]
    shapes = [
        f"{k} {tuple(state_dict[k].shape)} vs {tuple(v.shape)}"
        for k, v in own.items()
        if k in state_dict and tuple(state_dict[k].shape) != tuple(v.shape)
    ]
    if missing or unexpected or shapes:
        parts = []
        if saved is not None and saved != net.cfg:
            a, b = saved.to_dict(), net.cfg.to_dict()
            diff = ", ".join(f"{k}={a[k]!r} (this network: {b[k]!r})" for k in a if a[k] != b[k])
            parts.append(f"it was saved from another configuration: {diff}")
        for label, items in (("shape mismatches (saved vs this)", shapes), ("missing", missing)):
            if items:
                parts.append(f"{len(items)} {label}: {', '.join(items[:4])}{', ...' if len(items) > 4 else ''}")
        if unexpected:
            parts.append(f"{len(unexpected)} unexpected: {', '.join(unexpected[:4])}{', ...' * (len(unexpected) > 4)}")
        raise CheckpointError(f"checkpoint {path} does not fit this network: " + "; ".join(parts))
    net.load_state_dict(state_dict)


def save_net(net: DrMarioNet, path: str | Path) -> Path:
    """Write the network alone (its config and weights) in the checkpoint format."""
    return save_checkpoint(path, {"net_config": net.cfg.to_dict(), "model": net.state_dict()})


def load_net(path: str | Path, cfg: NetConfig | None = None) -> DrMarioNet:
    """A network (CPU, eval mode) from a checkpoint, built from its stored config, or from cfg to
    insist on a configuration (a mismatch is a CheckpointError listing the differences)."""
    state = read_checkpoint(path)
    saved = checkpoint_config(state, path)
    net = DrMarioNet(cfg or saved)
    load_state(net, state["model"], path, saved)
    return net.eval()


# ------------------------------------------------------------------------------------------------
# Inference


class Player:
    """A network ready for play: a private copy with batch norms folded in, in eval mode, on device
    in dtype (bfloat16 on CUDA, float32 elsewhere, by default), channels_last on CUDA.

    evaluate(cells uint8[N, 8, 16], pills uint8[N, 2], legal bool[N, 4, 8, 16] | None) -> Prediction,
    in chunks of `chunk` positions; positions travel to the device compact (130 bytes each).
    """

    def __init__(
        self,
        net: DrMarioNet,
        device: str | torch.device = "cpu",
        dtype: torch.dtype | None = None,
        chunk: int | None = None,
        compile: bool = False,
    ) -> None:
        self.device = torch.device(device)
        cuda = self.device.type == "cuda"
        self.dtype = dtype or (torch.bfloat16 if cuda else torch.float32)
        self.chunk = chunk or (8192 if cuda else 1024)
        self.config = net.cfg
        module = copy.deepcopy(net).fuse_bn().to(device=self.device, dtype=self.dtype)
        if cuda:
            module = module.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # (torch's stubs)
        self.module = module
        self._forward = torch.compile(module, dynamic=True) if compile else module

    @classmethod
    def from_module(cls, net: DrMarioNet, device: str | torch.device = "cpu", **kwargs) -> Player:
        return cls(net, device, **kwargs)

    @torch.inference_mode()
    def forward(self, planes: torch.Tensor, legal: torch.Tensor | None = None) -> NetOutput:
        """The network on planes already on the device (float[B, 18, 8, 16] in self.dtype)."""
        return self._forward(planes, legal)

    @torch.inference_mode()
    def evaluate(self, cells: np.ndarray, pills: np.ndarray, legal: np.ndarray | None = None) -> Prediction:
        cells = np.ascontiguousarray(cells, np.uint8)
        pills = np.ascontiguousarray(pills, np.uint8)
        n = len(cells)
        if cells.shape[1:] != (K.WIDTH, K.HEIGHT) or pills.shape != (n, 2):
            raise ValueError(
                f"evaluate needs cells uint8[N, 8, 16] and pills uint8[N, 2], got {cells.shape}, {pills.shape}"
            )
        if legal is not None:
            legal = np.ascontiguousarray(legal, bool)
            if legal.shape != (n, *MOVES_SHAPE):
                raise ValueError(f"evaluate needs legal bool[N, 4, 8, 16] with N={n}, got {legal.shape}")
        out = Prediction(
            np.empty(n, np.float32),
            np.empty(n, np.float32),
            np.empty(n, np.float32),
            np.empty((n, *MOVES_SHAPE), np.float32),
        )
        for s in range(0, n, self.chunk):
            e = min(s + self.chunk, n)
            c = torch.from_numpy(cells[s:e]).to(self.device)
            p = torch.from_numpy(pills[s:e]).to(self.device)
            x = planes_torch(c, p, self.dtype)
            if self.device.type == "cuda":
                x = x.contiguous(memory_format=torch.channels_last)
            mask = None if legal is None else torch.from_numpy(legal[s:e]).to(self.device)
            o = self.forward(x, mask)
            # one device-to-host copy per chunk: [won, cleared, duration, 512 moves]
            flat = torch.cat([o.won[:, None], o.cleared[:, None], o.duration[:, None], o.moves.flatten(1)], 1)
            flat = flat.float().cpu().numpy()  # type: ignore[assignment]  # (numpy from here on)
            out.won[s:e], out.cleared[s:e], out.duration[s:e] = flat[:, 0], flat[:, 1], flat[:, 2]
            out.moves[s:e] = flat[:, 3:].reshape(e - s, *MOVES_SHAPE)
        return out


def load_player(
    path: str | Path, device: str | torch.device = "cpu", dtype: torch.dtype | None = None, **kwargs
) -> Player:
    """A `Player` from a checkpoint (a training checkpoint or `save_net`'s file). kwargs: chunk, compile."""
    return Player(load_net(path), device, dtype, **kwargs)
