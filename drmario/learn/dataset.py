"""Training examples held compactly in memory, and expanded to tensors on the training device.

An example takes 209 bytes plus 6 per moves entry here: the board's cell codes (128 bytes), the pill
and the preview (2 each), the three scalar targets (5), the legal-move mask as 64 packed bytes, the
game id (8), and the moves target as its non-zero entries (flat index into the 512 slots,
probability), padded to the widest example of the set (about 100 entries, so about 800 bytes, for
round-0 targets that give mass to every legal move; fewer for visit-count targets). Planes and the
dense moves target are made on the device, per batch (`DeviceExamples.batch`).

`load_examples` reads example files (`example_files`: JSON Lines, optionally gzip, with a
``.meta.json`` sidecar) into an `ExampleSet`:

- Game ids come from the sidecar's ``games`` table (seed, level, first line, count), so
  `ExampleSet.split_by_game` keeps each game on one side (which side: by the game's content, not its
  id). A file without a sidecar falls back to the duration countdown (`example_files.infer_games`): a
  new game starts where an example's duration is not the previous one's minus 1 (minus the line gap,
  if bad lines were skipped). That finds whole games written in order; it cannot separate games that
  were cut short or interleaved.
- Probabilities are validated to sum to 1 within 1e-3 and then rescaled to sum to exactly 1.
- A decoded cache ``<file>.cache.npz`` is written next to each source (atomically; git-ignored). It
  is keyed by content (`cache_key`): a hash of the source's bytes, of its sidecar's, and of the
  source text of the modules that decode and compact examples (`CODE_MODULES`), so a changed file
  (whatever its size and modification time) or changed decoding code re-parses the JSON. The JSON
  file stays the source of truth. A cache made with ``on_error="skip"`` remembers the skipped
  lines: loading it with ``on_error="raise"`` raises the first of them, as parsing would. A cache
  that cannot be read (cut short, a changed byte) is ignored: the source is parsed again, the cache
  rewritten, and the load's warning names the damaged cache.
- ``augment=True`` adds the 5 other colour renamings of every example (6x the examples; game ids
  are kept, so a split never puts two colourings of one game on both sides). See `examples` for
  what this preserves and what it does not.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import importlib
import json
import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from drmario.engine import kernels as K
from drmario.engine.board import Board, Colour, Pill
from drmario.engine.rules import MOVES_SHAPE, N_MOVES
from drmario.files import atomic_file, file_sha256
from drmario.learn.encode import N_PLANES, planes_torch
from drmario.learn.example_decoding import Decoded
from drmario.learn.example_files import OnError, ReadReport, decode_file, infer_games, read_sidecar, sidecar_path
from drmario.learn.examples import COLOUR_PERMUTATIONS, Example, ExampleError, colour_table

CACHE_SUFFIX = ".cache.npz"
# The code that shapes a cache: parsing and validation, game ids, compaction, and what they use of
# the engine (board letters, legal moves). Their source text is part of every cache key.
CODE_MODULES = (
    "drmario.engine.board",
    "drmario.engine.kernels",
    "drmario.engine.rules",
    "drmario.learn.encode",
    "drmario.learn.example_decoding",
    "drmario.learn.example_files",
    "drmario.learn.dataset",
)
EXAMPLE_SUFFIXES = (".jsonl", ".jsonl.gz")
PathLike = str | os.PathLike


class Batch(NamedTuple):
    """A training batch on one device. B = batch size."""

    planes: torch.Tensor  # float[B, P, 8, 16] (P = 24, or the design's 18)
    won: torch.Tensor  # float[B], -1 or +1
    cleared: torch.Tensor  # float[B], viruses cleared from here to the end
    duration: torch.Tensor  # float[B], pills placed from here to the end
    moves: torch.Tensor  # float[B, 4, 8, 16], sums to 1
    legal: torch.Tensor  # bool[B, 4, 8, 16]
    future: torch.Tensor | None = None  # float[B, 8, 16] 1 where a cell is occupied n pills later (None: not asked)
    future_known: torch.Tensor | None = None  # bool[B] whether that board is an example (false: the game ends first)
    next_moves: torch.Tensor | None = None  # float[B, 4, 8, 16] the next decision's move target (None: not asked)
    next_known: torch.Tensor | None = None  # bool[B] whether the next decision is an example (0 targets where not)
    value_mask: torch.Tensor | None = None  # bool[B] the examples whose value targets train (None: all)


@dataclass
class ExampleSet:
    """N examples in compact numpy arrays. K = the most non-zero move probabilities of any example."""

    cells: np.ndarray  # uint8[N, 8, 16] cell codes
    pills: np.ndarray  # uint8[N, 2] (left, right) colours
    previews: np.ndarray  # uint8[N, 2] the preview's colours, (0, 0) where unknown
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
    def from_dense(
        cls,
        cells: np.ndarray,
        pills: np.ndarray,
        won: np.ndarray,
        cleared: np.ndarray,
        duration: np.ndarray,
        moves: np.ndarray,
        game: np.ndarray,
        legal: np.ndarray | None = None,
        previews: np.ndarray | None = None,
    ) -> ExampleSet:
        """Build from dense targets moves: float[N, 4, 8, 16]; legal: bool[N, 4, 8, 16] or None to
        compute it with the engine; previews: uint8[N, 2] or None (unknown)."""
        cells = np.ascontiguousarray(cells, np.uint8).reshape(-1, K.WIDTH, K.HEIGHT)
        pills = np.ascontiguousarray(pills, np.uint8).reshape(-1, 2)
        previews = np.zeros_like(pills) if previews is None else np.ascontiguousarray(previews, np.uint8).reshape(-1, 2)
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
            previews,
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
        """Split into (train, test) so that every game lies wholly on one side, held out where its own
        key (`game_keys`: a hash of seed and its first example's board, pill and preview) is below
        test_fraction: about that share of the games (at least one, and one kept, of two or more).
        A game's side does not depend on what else is loaded: a later round, training on these games
        and new ones from a network trained on the rest, holds out the same ones; and games whose first
        examples are alike (an NES seed played twice, each first decision written) fall on one side."""
        if not 0 <= test_fraction < 1:
            raise ValueError(f"test_fraction must be in [0, 1), got {test_fraction}")
        games, first = np.unique(self.game, return_index=True)  # first: in the identity colouring's block
        keys = game_keys(self.cells[first], self.pills[first], self.previews[first], seed)
        held = keys < test_fraction
        if test_fraction > 0 and len(games) > 1 and keys.min() < keys.max():  # (games alike share a key)
            held |= keys == keys.min()
            held &= keys != keys.max()
        is_test = np.isin(self.game, games[held])
        return self.subset(np.nonzero(~is_test)[0]), self.subset(np.nonzero(is_test)[0])

    def position_keys(self, seed: int) -> np.ndarray:
        """float64[N] in [0, 1): for each example a uniform key from its game's (`game_keys`) and its
        pills to the end (one decision of the game), so a decision's colour renamings share it, and it
        is the same in every round that loads the game (`TrainConfig.value_share` keeps those below the
        share)."""
        _, first, inverse = np.unique(self.game, return_index=True, return_inverse=True)
        games = _game_hashes(self.cells[first], self.pills[first], self.previews[first], seed)
        decision = self.duration.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        return _mix64(games[inverse.ravel()] ^ decision) / 2.0**64

    def example(self, i: int) -> Example:
        """Example i as an `Example` (its moves target dense): one position to draw or inspect."""
        preview = Pill(*map(Colour, self.previews[i])) if self.previews[i, 0] else None
        moves = self.subset(np.array([i])).dense_moves()[0]
        board, pill = Board(self.cells[i].copy()), Pill(*map(Colour, self.pills[i]))
        return Example(board, pill, self.won[i], self.cleared[i], self.duration[i], moves, preview)

    def dense_moves(self) -> np.ndarray:
        """float32[N, 4, 8, 16] moves targets (for analysis; training densifies on the device)."""
        out = np.zeros((len(self), N_MOVES), np.float32)
        np.add.at(out, (np.arange(len(self))[:, None], self.move_index.astype(np.int64)), self.move_prob)
        return out.reshape(len(self), *MOVES_SHAPE)

    def legal(self) -> np.ndarray:
        """bool[N, 4, 8, 16] legal-move masks."""
        return np.unpackbits(self.legal_bits, axis=1, count=N_MOVES).view(bool).reshape(len(self), *MOVES_SHAPE)

    def to_device(
        self,
        device: str | torch.device = "cpu",
        n_planes: int = N_PLANES,
        future_pills: int = 0,
        next_move: bool = False,
        value_mask: np.ndarray | None = None,
    ) -> DeviceExamples:
        return DeviceExamples(self, torch.device(device), n_planes, future_pills, next_move, value_mask)

    @property
    def nbytes(self) -> int:
        return sum(getattr(self, f.name).nbytes for f in fields(self))

    def digest(self) -> str:
        """A hex digest of every array, in order (a resumed training checks it meets the same examples)."""
        h = hashlib.blake2b(digest_size=16)
        for f in fields(self):
            a = np.ascontiguousarray(getattr(self, f.name))
            h.update(f"{f.name}{a.dtype}{a.shape}".encode())
            h.update(a.data)
        return h.hexdigest()


class DeviceExamples:
    """An `ExampleSet` copied, still compact, to a torch device; `batch` expands on the device to
    n_planes input planes (`encode`), and with future_pills > 0 adds the future-board target: which
    cells are occupied future_pills decisions later in the same game (`later_index`; a cell's code
    there is not empty), and with next_move the next decision's move target (`next_index`); value_mask
    bool[N] rides in each batch (`Batch.value_mask`)."""

    def __init__(
        self,
        examples: ExampleSet,
        device: torch.device,
        n_planes: int = N_PLANES,
        future_pills: int = 0,
        next_move: bool = False,
        value_mask: np.ndarray | None = None,
    ) -> None:
        def put(a: np.ndarray, dtype: torch.dtype | None = None) -> torch.Tensor:
            return torch.as_tensor(a, dtype=dtype).to(device)

        self.device, self.n_planes = device, n_planes
        self.cells = put(examples.cells)
        self.pills = put(examples.pills)
        self.previews = put(examples.previews)
        self.won = put(examples.won, torch.float32)
        self.cleared = put(examples.cleared, torch.float32)
        self.duration = put(examples.duration, torch.float32)
        self.move_index = put(examples.move_index.astype(np.int64))
        self.move_prob = put(examples.move_prob)
        self.legal_bits = put(examples.legal_bits)
        self._bit = torch.tensor([128, 64, 32, 16, 8, 4, 2, 1], dtype=torch.uint8, device=device)
        self.future_index = (
            put(later_index(examples.game, examples.duration, future_pills)) if future_pills else None
        )  # int64[N], -1 where the game ends first
        self.next_move = next_move
        if value_mask is not None and len(value_mask) != len(examples):
            raise ValueError(f"value_mask has {len(value_mask)} entries for {len(examples)} examples")
        self.value_mask = None if value_mask is None else put(np.asarray(value_mask, bool))
        self._game, self._game_duration = examples.game, examples.duration  # for next_index, when first asked

    def __len__(self) -> int:
        return len(self.won)

    def planes(self, indices: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """float[B, n_planes, 8, 16] the input planes of the examples at indices (a long tensor on this device)."""
        return planes_torch(self.cells[indices], self.pills[indices], self.previews[indices], self.n_planes, dtype)

    def batch(self, indices: torch.Tensor, dtype: torch.dtype = torch.float32) -> Batch:
        """Expand the examples at indices (a long tensor on this device) into a `Batch`."""
        n = len(indices)
        moves = self._moves(indices)
        legal = (self.legal_bits[indices, :, None] & self._bit) != 0
        future = future_known = next_moves = next_known = None
        if self.future_index is not None:
            later = self.future_index[indices]
            future_known = later >= 0
            future = (self.cells[later.clamp(min=0)] != K.EMPTY).float()
        if self.next_move:
            later = self.next_index[indices]
            next_known = later >= 0
            next_moves = self._moves(later.clamp(min=0)) * next_known[:, None, None, None]
        return Batch(
            planes=self.planes(indices, dtype),
            won=self.won[indices],
            cleared=self.cleared[indices],
            duration=self.duration[indices],
            moves=moves,
            legal=legal.view(n, *MOVES_SHAPE),
            future=future,
            future_known=future_known,
            next_moves=next_moves,
            next_known=next_known,
            value_mask=None if self.value_mask is None else self.value_mask[indices],
        )

    @functools.cached_property
    def next_index(self) -> torch.Tensor:
        """int64[N] the index of the same game's next decision, -1 where the game ends (`later_index`):
        the next-move target's, and the trainer's bootstrap's."""
        return torch.as_tensor(later_index(self._game, self._game_duration, 1)).to(self.device)

    def _moves(self, indices: torch.Tensor) -> torch.Tensor:
        """float[len(indices), 4, 8, 16] the dense move targets of the examples at indices."""
        moves = torch.zeros(len(indices), N_MOVES, device=self.device)
        moves.scatter_add_(1, self.move_index[indices], self.move_prob[indices])
        return moves.view(len(indices), *MOVES_SHAPE)


# ------------------------------------------------------------------------------------------------
# Loading example files


def _pad_entries(row: np.ndarray, slot: np.ndarray, prob: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Sparse entries (row int[T] ascending, slot int[T], prob float[T]) -> (move_index int16[n, K],
    move_prob float32[n, K]) padded with (0, 0); probabilities rescaled to sum to 1 per row."""
    counts = np.bincount(row, minlength=n)
    width = max(1, int(counts.max(initial=0)))
    position = np.arange(len(row)) - np.repeat(np.cumsum(counts) - counts, counts)
    total = np.bincount(row, weights=prob, minlength=n)
    index = np.zeros((n, width), np.int16)
    probs = np.zeros((n, width), np.float32)
    index[row, position] = slot
    probs[row, position] = (prob / total[row]).astype(np.float32)
    return index, probs


def compact(decoded: Decoded, game: np.ndarray) -> ExampleSet:
    """An `ExampleSet` from decoded examples (`example_decoding.Decoded`) and their game ids int64[n]."""
    index, probs = _pad_entries(decoded.row, decoded.slot, decoded.prob.astype(np.float64), len(decoded))
    return ExampleSet(
        cells=decoded.cells,
        pills=decoded.pills,
        previews=decoded.previews,
        won=decoded.won,
        cleared=decoded.cleared,
        duration=decoded.duration,
        move_index=index,
        move_prob=probs,
        legal_bits=decoded.legal_bits,
        game=np.asarray(game, np.int64),
    )


def empty_set() -> ExampleSet:
    return compact(Decoded.empty(), np.zeros(0, np.int64))


def game_keys(cells: np.ndarray, pills: np.ndarray, previews: np.ndarray, seed: int) -> np.ndarray:
    """float64[G] in [0, 1): for each game a uniform key from its first example (cells uint8[G, 8, 16],
    pills and previews uint8[G, 2]) and seed, the same wherever and beside whatever the game is loaded."""
    return _game_hashes(cells, pills, previews, seed) / 2.0**64


def _game_hashes(cells: np.ndarray, pills: np.ndarray, previews: np.ndarray, seed: int) -> np.ndarray:
    rows = np.concatenate([cells.reshape(len(cells), -1), pills, previews], axis=1).astype(np.uint8)
    salt = str(int(seed)).encode()
    digests = b"".join(hashlib.blake2b(row.tobytes(), digest_size=8, key=salt).digest() for row in rows)
    return np.frombuffer(digests, "<u8").copy()


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser over uint64[n] (wrapping arithmetic): a vectorised hash."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def later_index(game: np.ndarray, duration: np.ndarray, n: int) -> np.ndarray:
    """For every example, the index of the example n decisions later in the same game (its
    duration n smaller), or -1 where the game ends first or that decision is not an example (a
    self-play run with playout cap randomisation writes only some). Decisions of one game count
    their duration down by one pill each. Where a decision appears more than once (the colour
    renamings of `augment_colours`, in blocks), its k-th copy is paired with the later decision's
    k-th copy: the same renaming, not always the first."""
    if len(game) == 0:
        return np.zeros(0, np.int64)
    key = game.astype(np.int64) * 100_000 + duration.astype(np.int64)
    order = np.argsort(key, kind="stable")
    ranked = key[order]
    first = np.searchsorted(ranked, ranked)  # each sorted key's first position: its copy number follows
    copy = np.empty(len(key), np.int64)
    copy[order] = np.arange(len(key)) - first
    pos = np.searchsorted(ranked, key - n)
    pos = np.minimum(pos + copy, len(order) - 1)  # the later key's copy of the same number, if any
    found = (ranked[pos] == key - n) & (duration >= n)
    return np.where(found, order[pos], -1)


def target_spread(es: ExampleSet) -> dict[str, np.ndarray]:
    """How sharp each example's moves target is: the placements it gives mass to, and the top one's
    share. A same-colour pill's placement has two slots, rotations r and r + 2 (`symmetrize` splits its
    mass between them): counted once, with both halves."""
    same = es.pills[:, 0] == es.pills[:, 1]
    mirrored = same[:, None] & (es.move_index // (K.WIDTH * K.HEIGHT) >= 2)
    counted = (es.move_prob > 0) & ~mirrored
    mass = np.where(same[:, None], np.float32(2), np.float32(1)) * np.where(counted, es.move_prob, np.float32(0))
    total = es.move_prob.sum(axis=1)
    top = np.divide(mass.max(axis=1, initial=0), total, out=np.zeros(len(es), np.float32), where=total > 0)
    return {"placements with mass": counted.sum(axis=1), "top placement share": top}


def augment_colours(examples: ExampleSet, permutations: Sequence[Sequence[int]] = COLOUR_PERMUTATIONS) -> ExampleSet:
    """Every example once per colour permutation (default all 6, identity first), in blocks of
    len(examples). Board and pill colours are renamed; legal masks, moves and targets are
    unchanged (legality does not depend on colour); game ids are kept."""
    parts = []
    for perm in permutations:
        pill_table = np.array([0, *map(int, perm)], np.uint8)
        parts.append(
            replace(
                examples,
                cells=colour_table(perm)[examples.cells],
                pills=pill_table[examples.pills],
                previews=pill_table[examples.previews],  # unknown (0) stays unknown
            )
        )
    return ExampleSet.concat(parts)


def example_files(paths: PathLike | Iterable[PathLike]) -> list[Path]:
    """Example files named by paths: files, folders (every ``*.jsonl`` / ``*.jsonl.gz`` below them)
    or glob patterns (``**`` allowed). Sorted, without duplicates; FileNotFoundError when a path
    names nothing."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    found: dict[Path, None] = {}
    for p in paths:
        text = os.fspath(p)
        if Path(text).is_dir():
            matches = [q for q in Path(text).rglob("*.jsonl*") if q.name.endswith(EXAMPLE_SUFFIXES)]
        elif glob.has_magic(text):
            matches = [Path(q) for q in glob.glob(text, recursive=True) if q.endswith(EXAMPLE_SUFFIXES)]
        elif Path(text).is_file():
            if not text.endswith(EXAMPLE_SUFFIXES):
                raise ValueError(f"{text}: example files are named *.jsonl or *.jsonl.gz")
            matches = [Path(text)]
        else:
            raise FileNotFoundError(f"no such example file or folder: {text}")
        if not matches:
            raise FileNotFoundError(f"no example files (*.jsonl, *.jsonl.gz) in or matching {text}")
        for q in sorted(matches):
            found.setdefault(q, None)
    return sorted(found, key=lambda q: os.fspath(q))


def cache_path(path: PathLike) -> Path:
    return Path(os.fspath(path) + CACHE_SUFFIX)


def _file_digest(path: Path) -> str | None:
    """`file_sha256` of path, or None if there is no such file."""
    try:
        return file_sha256(path)
    except FileNotFoundError:
        return None


@functools.cache
def code_digest() -> str:
    """SHA-256 of the source text of `CODE_MODULES` (each module's file as loaded)."""
    digest = hashlib.sha256()
    for name in CODE_MODULES:
        file = importlib.import_module(name).__file__
        if file is None:
            raise RuntimeError(f"{name} has no file to hash for the example cache key")
        digest.update(name.encode() + b"\0" + Path(file).read_bytes() + b"\0")
    return digest.hexdigest()


def cache_key(path: PathLike) -> str:
    """What a cache of example file path must have been made from: hashes of the file's content,
    its sidecar's (null without one) and the decoding code (`code_digest`)."""
    path = Path(path)
    key = {"source": _file_digest(path), "sidecar": _file_digest(sidecar_path(path)), "code": code_digest()}
    return json.dumps(key, sort_keys=True)


_CACHED_ARRAYS = (
    "cells",
    "pills",
    "previews",
    "won",
    "cleared",
    "duration",
    "move_index",
    "move_prob",
    "legal_bits",
    "game",
)


def _read_cache(path: Path, key: str) -> tuple[tuple[ExampleSet, ReadReport, int] | None, str | None]:
    """(the cached examples of path, or None to parse it; what was wrong with an unusable cache)."""
    cache = cache_path(path)
    if not cache.exists():
        return None, None
    try:
        with np.load(cache) as data:
            if str(data["key"]) != key:
                return None, None
            arrays = {name: data[name] for name in _CACHED_ARRAYS}  # read (and CRC-checked) here
            report = ReadReport.from_dict(json.loads(str(data["report"])))
            n_games = int(data["n_games"])
        examples = ExampleSet(**arrays)
    except Exception as e:  # noqa: BLE001 (a cache is disposable: any damage, e.g. zipfile.BadZipFile, zlib.error, EOFError)
        return (
            None,
            f"{cache}: damaged cache ignored ({type(e).__name__}: {e}); {path} parsed again and the cache rewritten",
        )
    return (examples, report, n_games), None


def _write_cache(path: Path, key: str, examples: ExampleSet, report: ReadReport, n_games: int) -> None:
    try:
        with atomic_file(cache_path(path), "wb") as f:
            np.savez(
                f,
                key=np.array(key),
                report=np.array(json.dumps(report.to_dict())),
                n_games=np.array(n_games),
                **{name: getattr(examples, name) for name in _CACHED_ARRAYS},
            )
    except OSError as e:  # a read-only folder, a full disk: loading still works, uncached
        report.warnings.append(f"cache not written: {e}")


def _games_of(path: Path, decoded: Decoded, report: ReadReport, on_error: OnError) -> tuple[np.ndarray, int]:
    """Local game ids (int64[n], 0..G-1) of a file's examples, and G."""
    problem = None
    try:
        side = read_sidecar(path)
    except ValueError as e:
        side, problem = None, str(e)
    if side is not None:
        table = side.get("games")
        try:
            if not isinstance(table, list):
                raise TypeError("not a list")
            first = np.array([int(g["first"]) for g in table], np.int64)
            count = np.array([int(g["count"]) for g in table], np.int64)
        except (TypeError, KeyError, ValueError):
            problem = f"{sidecar_path(path)}: 'games' must be a list of {{seed, level, first, count}}"
        else:
            lines = report.lines + report.blank
            expected = np.cumsum(count) - count
            if not np.array_equal(first, expected) or (count < 0).any():
                problem = f"{sidecar_path(path)}: the games table is not contiguous from line 0"
            # a file cut short (on_error="skip": `ReadReport.missing`) keeps its table for the lines it has
            elif count.sum() != side.get("examples", count.sum()) or count.sum() != report.lines + report.missing:
                problem = (
                    f"{sidecar_path(path)}: the sidecar describes {int(count.sum())} examples, "
                    f"but {path} has {report.lines} non-blank lines of {lines}"
                )
            else:
                game = np.searchsorted(first, decoded.index, side="right") - 1
                report.games, report.games_from = len(table), "sidecar"
                return game.astype(np.int64), len(table)
    if problem is not None:
        if on_error == "raise":
            raise ValueError(
                f"{problem}: delete or restore the sidecar (without one, games are inferred from the duration "
                "countdown), or load with on_error='skip' to fall back to that"
            )
        report.warnings.append(f"{problem}; game ids inferred from the duration countdown instead")
    game = infer_games(decoded.duration, decoded.index)
    n_games = int(game[-1]) + 1 if len(game) else 0
    report.games, report.games_from = n_games, "duration countdown"
    return game, n_games


def _load_file(
    path: Path, on_error: OnError, use_cache: bool, tick: Callable[[int], None]
) -> tuple[ExampleSet, ReadReport, int]:
    key = cache_key(path) if use_cache else ""
    hit, damaged = _read_cache(path, key) if use_cache else (None, None)
    if hit is not None and on_error == "raise" and (hit[1].warnings or hit[1].missing) and not hit[1].skipped:
        hit = None  # e.g. a file cut short of its sidecar's count: parse again, which raises
    if hit is not None:
        examples, report, n_games = hit
        if report.skipped and on_error == "raise":  # as parsing would: the first bad line
            line = report.error_lines[0]
            detail = report.errors[0].removeprefix(f"{report.path}:{line}: ")
            raise ExampleError(f"{path}:{line}", detail, os.fspath(path), line)
        report.path, report.on_error, report.cached = os.fspath(path), on_error, True
        tick(path.stat().st_size)
        return examples, report, n_games
    decoded, report = decode_file(path, on_error, progress=tick)
    game, n_games = _games_of(path, decoded, report, on_error)
    examples = compact(decoded, game)
    if use_cache:
        _write_cache(path, key, examples, report, n_games)
    if damaged:  # said in the load's warning, not kept in the new cache's report
        report.warnings.append(damaged)
    return examples, report, n_games


def load_examples(
    paths: PathLike | Iterable[PathLike],
    *,
    on_error: OnError = "raise",
    cache: bool = True,
    augment: bool = False,
    progress: bool = True,
    summary: bool | None = None,
    reports: list[ReadReport] | None = None,
) -> ExampleSet:
    """Load example files into one compact `ExampleSet` (module docstring: games, cache, augment).

    paths: a file, a folder, a glob, or a list of them (`example_files`). on_error="raise" stops at
    the first bad line (`examples.ExampleError`, naming file and line); "skip" leaves bad lines out,
    counts them and warns (a `UserWarning` with the report). reports, if given, receives one
    `example_files.ReadReport` per file. Game ids are unique across files. progress: a tqdm bar over the
    bytes read. summary: print one line of what was loaded and dropped (None: as progress).
    """
    from drmario.progress import tqdm

    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    files = example_files(paths)
    total = sum(f.stat().st_size for f in files)
    parts: list[ExampleSet] = []
    file_reports: list[ReadReport] = []
    offset = 0
    with tqdm(total=total, unit="B", unit_scale=True, desc="examples", disable=not progress, leave=False) as bar:
        for f in files:
            examples, report, n_games = _load_file(f, on_error, cache, bar.update)
            examples.game = examples.game + offset
            offset += n_games
            parts.append(examples)
            file_reports.append(report)
    out = ExampleSet.concat(parts) if parts else empty_set()
    if augment:
        out = augment_colours(out)
    if reports is not None:
        reports.extend(file_reports)
    dropped = sum(r.dropped for r in file_reports)
    noted = [r for r in file_reports if r.dropped or r.warnings]
    if noted:
        warnings.warn("\n".join(str(r) for r in noted), stacklevel=2)
    if summary is None:
        summary = progress
    if summary:
        cached = sum(r.cached for r in file_reports)
        print(
            f"loaded {len(out):,} examples ({offset:,} games{', x6 colour permutations' if augment else ''}) "
            f"from {len(files)} file(s), {cached} from cache; on_error={on_error!r}: {dropped:,} examples dropped; "
            f"{out.nbytes / max(len(out), 1):.0f} bytes/example"
        )
    return out
