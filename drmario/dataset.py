"""Training examples held compactly in memory, and expanded to tensors on the training device.

An example takes about 200 bytes here: the board's cell codes (128 bytes), the pill (2), the three
scalar targets, the legal-move mask as 64 packed bytes and the moves target as its non-zero entries
(flat index into the 512 slots, probability), padded to the widest example. Planes and the dense
moves target are made on the device, per batch (`DeviceExamples.batch`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import NamedTuple

import numpy as np
import torch

from . import kernels as K
from .encode import MOVES_SHAPE, N_MOVES, planes_torch


class Batch(NamedTuple):
    """A training batch on one device. B = batch size."""

    planes: torch.Tensor  # float[B, 18, 8, 16]
    won: torch.Tensor  # float[B], -1 or +1
    cleared: torch.Tensor  # float[B], viruses cleared from here to the end
    duration: torch.Tensor  # float[B], pills placed from here to the end
    moves: torch.Tensor  # float[B, 4, 8, 16], sums to 1
    legal: torch.Tensor  # bool[B, 4, 8, 16]


@dataclass
class ExampleSet:
    """N examples in compact numpy arrays. K = the most non-zero move probabilities of any example."""

    cells: np.ndarray  # uint8[N, 8, 16] cell codes
    pills: np.ndarray  # uint8[N, 2] (left, right) colours
    won: np.ndarray  # int8[N]
    cleared: np.ndarray  # int16[N]
    duration: np.ndarray  # int16[N]
    move_index: np.ndarray  # int16[N, K] flat move slot r * 128 + x * 16 + y (padding: 0)
    move_prob: np.ndarray  # float32[N, K] (padding: 0)
    legal_bits: np.ndarray  # uint8[N, 64] legal-move mask, packed with np.packbits
    game: np.ndarray  # int64[N] game id: examples of one game share it (for the split)

    def __len__(self) -> int:
        return len(self.won)

    @classmethod
    def from_dense(cls, cells, pills, won, cleared, duration, moves, game, legal=None) -> ExampleSet:
        """Build from dense targets moves: float[N, 4, 8, 16]; legal: bool[N, 4, 8, 16] or None to
        compute it with the engine."""
        cells = np.ascontiguousarray(cells, np.uint8).reshape(-1, K.WIDTH, K.HEIGHT)
        pills = np.ascontiguousarray(pills, np.uint8).reshape(-1, 2)
        flat = np.asarray(moves, np.float32).reshape(len(cells), N_MOVES)
        width = max(1, int((flat > 0).sum(axis=1).max(initial=0)))
        order = np.argsort(flat <= 0, axis=1, kind="stable")[:, :width]  # non-zero slots first
        prob = np.take_along_axis(flat, order, axis=1)
        index = np.where(prob > 0, order, 0).astype(np.int16)
        if legal is None:
            legal = np.empty((len(cells), *MOVES_SHAPE), np.uint8)
            K.legal_masks_batch(cells, pills, legal)
        legal_bits = np.packbits(np.asarray(legal, bool).reshape(len(cells), N_MOVES), axis=1)
        return cls(
            cells,
            pills,
            np.asarray(won, np.int8),
            np.asarray(cleared, np.int16),
            np.asarray(duration, np.int16),
            index,
            prob,
            legal_bits,
            np.asarray(game, np.int64),
        )

    def subset(self, indices: np.ndarray) -> ExampleSet:
        return ExampleSet(**{f.name: getattr(self, f.name)[indices] for f in fields(self)})

    @classmethod
    def concat(cls, parts: list[ExampleSet]) -> ExampleSet:
        """Join example sets (game ids are assumed distinct already)."""
        width = max(p.move_index.shape[1] for p in parts)

        def pad(a: np.ndarray) -> np.ndarray:
            return np.pad(a, ((0, 0), (0, width - a.shape[1])))

        out = {
            f.name: np.concatenate([getattr(p, f.name) for p in parts])
            for f in fields(cls)
            if not f.name.startswith("move_")
        }
        out["move_index"] = np.concatenate([pad(p.move_index) for p in parts])
        out["move_prob"] = np.concatenate([pad(p.move_prob) for p in parts])
        return cls(**out)

    def split_by_game(self, test_fraction: float, seed: int) -> tuple[ExampleSet, ExampleSet]:
        """Split into (train, test) so that every game lies wholly on one side."""
        if not 0 <= test_fraction < 1:
            raise ValueError(f"test_fraction must be in [0, 1), got {test_fraction}")
        games = np.unique(self.game)
        rng = np.random.default_rng(seed)
        n_test = int(round(test_fraction * len(games)))
        if test_fraction > 0 and len(games) > 1:
            n_test = min(max(n_test, 1), len(games) - 1)
        test_games = rng.choice(games, n_test, replace=False)
        is_test = np.isin(self.game, test_games)
        return self.subset(np.nonzero(~is_test)[0]), self.subset(np.nonzero(is_test)[0])

    def dense_moves(self) -> np.ndarray:
        """float32[N, 4, 8, 16] moves targets (for analysis; training densifies on the device)."""
        out = np.zeros((len(self), N_MOVES), np.float32)
        np.add.at(out, (np.arange(len(self))[:, None], self.move_index.astype(np.int64)), self.move_prob)
        return out.reshape(len(self), *MOVES_SHAPE)

    def legal(self) -> np.ndarray:
        """bool[N, 4, 8, 16] legal-move masks."""
        return np.unpackbits(self.legal_bits, axis=1, count=N_MOVES).view(bool).reshape(len(self), *MOVES_SHAPE)

    def to_device(self, device: str | torch.device = "cpu") -> DeviceExamples:
        return DeviceExamples(self, torch.device(device))

    @property
    def nbytes(self) -> int:
        return sum(getattr(self, f.name).nbytes for f in fields(self))


class DeviceExamples:
    """An `ExampleSet` copied, still compact, to a torch device; `batch` expands on the device."""

    def __init__(self, examples: ExampleSet, device: torch.device) -> None:
        def put(a: np.ndarray, dtype=None) -> torch.Tensor:
            return torch.as_tensor(a, dtype=dtype).to(device)

        self.device = device
        self.cells = put(examples.cells)
        self.pills = put(examples.pills)
        self.won = put(examples.won, torch.float32)
        self.cleared = put(examples.cleared, torch.float32)
        self.duration = put(examples.duration, torch.float32)
        self.move_index = put(examples.move_index.astype(np.int64))
        self.move_prob = put(examples.move_prob)
        self.legal_bits = put(examples.legal_bits)
        self._bit = torch.tensor([128, 64, 32, 16, 8, 4, 2, 1], dtype=torch.uint8, device=device)

    def __len__(self) -> int:
        return len(self.won)

    def batch(self, indices: torch.Tensor, dtype: torch.dtype = torch.float32) -> Batch:
        """Expand the examples at indices (a long tensor on this device) into a `Batch`."""
        n = len(indices)
        moves = torch.zeros(n, N_MOVES, device=self.device)
        moves.scatter_add_(1, self.move_index[indices], self.move_prob[indices])
        legal = (self.legal_bits[indices, :, None] & self._bit) != 0
        return Batch(
            planes=planes_torch(self.cells[indices], self.pills[indices], dtype),
            won=self.won[indices],
            cleared=self.cleared[indices],
            duration=self.duration[indices],
            moves=moves.view(n, *MOVES_SHAPE),
            legal=legal.view(n, *MOVES_SHAPE),
        )
