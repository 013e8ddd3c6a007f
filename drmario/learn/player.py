"""`Player`: a network ready for play, the batched `Evaluator` the search calls."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import torch

from drmario.engine import kernels as K
from drmario.engine.rules import MOVES_SHAPE
from drmario.learn.checkpoint import load_net
from drmario.learn.encode import planes_torch
from drmario.learn.net import SEARCH_VALUES, DrMarioNet, NetOutput
from drmario.search import Prediction


def prediction_of(values: np.ndarray, moves: np.ndarray) -> Prediction:
    """A `Prediction` from values float32[N, SEARCH_VALUES] (`NetOutput.search_values`' columns) and
    moves float32[N, 4, 8, 16] (each column copied out: contiguous)."""
    won, cleared, duration, win_pills, loss_cleared, loss_pills = (np.ascontiguousarray(c) for c in values.T)
    return Prediction(won, cleared, duration, moves, win_pills, loss_cleared, loss_pills)


class Player:
    """A network ready for play: a private copy with batch norms folded in, in eval mode, on device
    in dtype (bfloat16 on CUDA, float32 elsewhere, by default), channels_last (faster on the CPU too).

    evaluate(cells uint8[N, 8, 16], pills uint8[N, 2], previews uint8[N, 2] | None, *, legal bool[N, 4,
    8, 16] | None) -> Prediction, in chunks of `chunk` positions; positions travel to the device compact
    (132 bytes each). A network with the design's 18 planes ignores the previews.
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
        module.future_conv = module.next_move_conv = None  # the auxiliary heads: only training reads them
        module = module.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # (torch's stubs)
        self.module = module
        self._forward = torch.compile(module, dynamic=True) if compile else module

    @classmethod
    def from_module(cls, net: DrMarioNet, device: str | torch.device = "cpu", **kwargs: Any) -> Player:
        return cls(net, device, **kwargs)

    @torch.inference_mode()
    def forward(self, planes: torch.Tensor, legal: torch.Tensor | None = None) -> NetOutput:
        """The network on planes already on the device (float[B, P, 8, 16] in self.dtype, best channels_last)."""
        return self._forward(planes, legal)

    @torch.inference_mode()
    def evaluate(
        self,
        cells: np.ndarray,
        pills: np.ndarray,
        previews: np.ndarray | None = None,
        *,
        legal: np.ndarray | None = None,
    ) -> Prediction:
        """The network at N positions: cells uint8[N, 8, 16], pills and previews uint8[N, 2] (previews
        None: zeros, which a network with the design's 18 planes ignores); legal bool[N, 4, 8, 16]
        masks the moves (None: every slot). Evaluated in chunks of `chunk` positions; float32 out."""
        cells = np.require(cells, np.uint8, ["C", "W"])  # torch.from_numpy needs a writable array
        pills = np.ascontiguousarray(pills, np.uint8)
        n = len(cells)
        previews = np.zeros_like(pills) if previews is None else np.ascontiguousarray(previews, np.uint8)
        if cells.shape[1:] != (K.WIDTH, K.HEIGHT) or pills.shape != (n, 2) or previews.shape != (n, 2):
            raise ValueError(
                "evaluate needs cells uint8[N, 8, 16], pills and previews uint8[N, 2], got "
                f"{cells.shape}, {pills.shape}, {previews.shape}"
            )
        if legal is not None:
            legal = np.ascontiguousarray(legal, bool)
            if legal.shape != (n, *MOVES_SHAPE):
                raise ValueError(f"evaluate needs legal bool[N, 4, 8, 16] with N={n}, got {legal.shape}")
        values = np.empty((n, SEARCH_VALUES), np.float32)
        moves = np.empty((n, *MOVES_SHAPE), np.float32)
        for s in range(0, n, self.chunk):
            e = min(s + self.chunk, n)
            c = torch.from_numpy(cells[s:e]).to(self.device)
            p = torch.from_numpy(pills[s:e]).to(self.device)
            q = torch.from_numpy(previews[s:e]).to(self.device)
            x = planes_torch(c, p, q, self.config.planes, self.dtype).contiguous(memory_format=torch.channels_last)
            mask = None if legal is None else torch.from_numpy(legal[s:e]).to(self.device)
            o = self.forward(x, mask)
            # one device-to-host copy per chunk: [the search's 6 values, 512 moves]
            flat = torch.cat([o.search_values(), o.moves.flatten(1).float()], 1).cpu().numpy()
            values[s:e], moves[s:e] = flat[:, :SEARCH_VALUES], flat[:, SEARCH_VALUES:].reshape(e - s, *MOVES_SHAPE)
        return prediction_of(values, moves)


def load_player(
    path: str | Path, device: str | torch.device = "cpu", dtype: torch.dtype | None = None, **kwargs: Any
) -> Player:
    """A `Player` from a checkpoint (a training checkpoint or `save_net`'s file). kwargs: chunk, compile."""
    return Player(load_net(path), device, dtype, **kwargs)
