"""Network inference for self-play at GPU scale.

- `BatchedInference`: the leaves of many lockstep games in a few fixed batch shapes (`buckets`; on
  CUDA a batch is padded up to the next one), so CUDA graphs replay one captured forward per shape;
  bf16 on CUDA, channels_last; positions travel compact (132 bytes each) through pinned host
  buffers with non-blocking copies, and the outputs come back the same way. `submit` returns at
  once and `wait` collects, so the CPU can search one group of games while the GPU evaluates
  another.
  (`lockstep.play_lockstep` overlaps two halves of the games this way.)
- `InferenceServer` / `RemoteEvaluator`: one process owns the network and serves search worker
  processes (one per CPU core) through shared memory, merging their requests into large batches.

Every evaluator keeps `busy_s` (device time of the forward passes), batch counts and a batch-size
histogram; `InferenceStats.row()` turns them into a metrics.csv row.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import queue
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from multiprocessing import shared_memory
from multiprocessing.connection import Connection
from typing import Any, NamedTuple

import numpy as np
import torch

from drmario.engine import kernels as K
from drmario.engine.rules import MOVES_SHAPE, N_MOVES
from drmario.files import RunError, die_with_parent
from drmario.learn.device import resolve_dtype
from drmario.learn.encode import EXPERT_PLANES, planes_torch
from drmario.learn.net import SEARCH_VALUES, DrMarioNet, NetConfig
from drmario.learn.player import Player, prediction_of
from drmario.search.core import Prediction

OUT_WIDTH = SEARCH_VALUES + N_MOVES  # NetOutput.search_values' 6 columns, 512 move probabilities
HISTOGRAM_EDGES = (0, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 1 << 30)


@dataclass
class InferenceStats:
    """Device time and batch sizes since `start` (reset with `reset`)."""

    busy_s: float = 0.0  # time the device spent in forward passes
    batches: int = 0
    positions: int = 0
    padded: int = 0  # positions evaluated including the padding to bucket sizes
    histogram: list[int] = field(default_factory=lambda: [0] * (len(HISTOGRAM_EDGES) - 1))
    start: float = field(default_factory=time.perf_counter)

    def add(self, n: int, padded: int, seconds: float) -> None:
        self.busy_s += seconds
        self.batches += 1
        self.positions += n
        self.padded += padded
        self.histogram[int(np.searchsorted(HISTOGRAM_EDGES, n, side="right")) - 1] += 1

    def reset(self) -> None:
        fresh = InferenceStats()
        for f in fields(self):
            setattr(self, f.name, getattr(fresh, f.name))

    def row(self) -> dict:
        """A metrics row: wall time, positions/s, busy fraction and the batch-size histogram."""
        wall = max(time.perf_counter() - self.start, 1e-9)
        row = {
            "wall_s": round(wall, 3),
            "batches": self.batches,
            "positions": self.positions,
            "positions_per_s": round(self.positions / wall, 1),
            "device_busy": round(min(self.busy_s / wall, 1.0), 4),
            "mean_batch": round(self.positions / max(self.batches, 1), 1),
            "padding": round(1 - self.positions / self.padded, 4) if self.padded else 0.0,  # none yet: none padded
        }
        for lo, hi, count in zip(HISTOGRAM_EDGES, HISTOGRAM_EDGES[1:], self.histogram):
            row[f"batches_{lo}_{hi if hi < 1 << 30 else 'up'}"] = count
        return row


def _unpack(flat: np.ndarray) -> Prediction:
    return prediction_of(flat[:, :SEARCH_VALUES], flat[:, SEARCH_VALUES:].reshape(len(flat), *MOVES_SHAPE).copy())


class Ticket(NamedTuple):
    """A submitted batch, to `wait` on: bucket, its padded size (0 from `RemoteEvaluator`), its
    buffer slot, and n, how many positions it holds."""

    bucket: int
    slot: int
    n: int


class BatchedInference:
    """Asynchronous fixed-shape inference of a network on one device (see the module docstring).

    evaluate(cells, pills, previews) is the search `Evaluator` form; submit/wait the overlapping one. A batch
    larger than the largest bucket is evaluated in pieces by `evaluate` (`submit` refuses it).
    """

    def __init__(
        self,
        net: DrMarioNet,
        device: str | torch.device = "cpu",
        *,
        dtype: torch.dtype | None = None,
        buckets: Sequence[int] = (64, 256, 1024, 4096),
        slots: int = 2,
        cuda_graphs: bool = True,
        compile: bool = False,
    ) -> None:
        self.player = Player(net, device, dtype)  # batch norms folded, eval mode, dtype, channels_last
        self.device, self.dtype = self.player.device, self.player.dtype
        self.cuda = self.device.type == "cuda"
        self.module = torch.compile(self.player.module) if compile else self.player.module
        self.buckets = sorted(buckets)
        # No graph for the expert's planes: they are computed on the host (`encode._planes_gather`), a copy that
        # a CUDA graph can neither capture nor replay with new boards.
        self.use_graphs = cuda_graphs and self.cuda and self.player.config.planes != EXPERT_PLANES
        self.stats = InferenceStats()
        self._buffers: dict[tuple[int, int], dict] = {}
        self._next_slot = dict.fromkeys(self.buckets, 0)
        self._slots = slots
        self._pending: dict[tuple[int, int], Any] = {}  # slot -> CPU result or CUDA events

    # --- buffers and the captured forward pass per (bucket, slot)

    def _buffer(self, bucket: int, slot: int) -> dict:
        key = (bucket, slot)
        if key not in self._buffers:
            pin = self.cuda
            buf: dict[str, Any] = {
                "host_cells": torch.zeros((bucket, K.WIDTH, K.HEIGHT), dtype=torch.uint8, pin_memory=pin),
                "host_pills": torch.ones((bucket, 2), dtype=torch.uint8, pin_memory=pin),
                "host_previews": torch.ones((bucket, 2), dtype=torch.uint8, pin_memory=pin),
                "host_out": torch.zeros((bucket, OUT_WIDTH), dtype=torch.float32, pin_memory=pin),
                "cells": torch.zeros((bucket, K.WIDTH, K.HEIGHT), dtype=torch.uint8, device=self.device),
                "pills": torch.ones((bucket, 2), dtype=torch.uint8, device=self.device),
                "previews": torch.ones((bucket, 2), dtype=torch.uint8, device=self.device),
                "out": torch.zeros((bucket, OUT_WIDTH), dtype=torch.float32, device=self.device),
                "graph": None,
            }
            self._buffers[key] = buf
            if self.use_graphs:
                with torch.cuda.device(self.device):  # the capture's streams on this device, not the current one
                    buf["graph"] = self._capture(buf)
        return self._buffers[key]

    @torch.inference_mode()
    def _forward(self, buf: dict, n: int | None = None) -> None:
        """The whole bucket (a fixed shape, for the CUDA graph), or its first n rows (CPU: padding
        buys nothing there)."""
        x = planes_torch(buf["cells"][:n], buf["pills"][:n], buf["previews"][:n], self.player.config.planes, self.dtype)
        x = x.contiguous(memory_format=torch.channels_last)
        o = self.module(x)
        out = buf["out"][:n]
        torch.cat([o.search_values(), o.moves.flatten(1).float()], 1, out=out)

    def _capture(self, buf: dict) -> torch.cuda.CUDAGraph:
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            for _ in range(3):  # warm up (cuDNN autotuning, lazy allocations) outside the graph
                self._forward(buf)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._forward(buf)
        return graph

    # --- the asynchronous interface

    def submit(self, cells: np.ndarray, pills: np.ndarray, previews: np.ndarray) -> Ticket:
        """Start evaluating cells uint8[N, 8, 16], pills and previews uint8[N, 2] (N <= the largest
        bucket)."""
        n = len(cells)
        bucket = next((b for b in self.buckets if b >= n), None)
        if bucket is None:
            raise ValueError(f"submit takes at most {self.buckets[-1]} positions, got {n}; use evaluate")
        slot = self._next_slot[bucket]
        self._next_slot[bucket] = (slot + 1) % self._slots
        if (bucket, slot) in self._pending:
            raise RuntimeError(f"all {self._slots} slots of bucket {bucket} are in flight: wait for one first")
        buf = self._buffer(bucket, slot)
        buf["host_cells"].numpy()[:n] = cells
        buf["host_pills"].numpy()[:n] = pills
        buf["host_previews"].numpy()[:n] = previews
        if not self.cuda:
            start = time.perf_counter()
            for name in ("cells", "pills", "previews"):
                buf[name].copy_(buf[f"host_{name}"])
            self._forward(buf, n)
            self.stats.add(n, n, time.perf_counter() - start)
            self._pending[(bucket, slot)] = buf["out"].numpy()[:n].copy()
            return Ticket(bucket, slot, n)
        with torch.cuda.device(self.device):  # events record on this device's stream (cuda:1 too), not the current one
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            for name in ("cells", "pills", "previews"):
                buf[name].copy_(buf[f"host_{name}"], non_blocking=True)
            begin.record()
            if buf["graph"] is not None:
                buf["graph"].replay()
            else:
                self._forward(buf)
            end.record()
            buf["host_out"].copy_(buf["out"], non_blocking=True)
            done = torch.cuda.Event()
            done.record()
        self._pending[(bucket, slot)] = (begin, end, done)
        return Ticket(bucket, slot, n)

    def wait(self, ticket: Ticket) -> Prediction:
        """The prediction of a submitted batch (blocks until the device has it)."""
        pending = self._pending.pop((ticket.bucket, ticket.slot))
        if not self.cuda:
            return _unpack(pending)
        begin, end, done = pending
        done.synchronize()
        self.stats.add(ticket.n, ticket.bucket, begin.elapsed_time(end) / 1000)
        return _unpack(self._buffers[(ticket.bucket, ticket.slot)]["host_out"].numpy()[: ticket.n])

    def evaluate(self, cells: np.ndarray, pills: np.ndarray, previews: np.ndarray) -> Prediction:
        """`submit` then `wait`, in pieces of the largest bucket (any N)."""
        step = self.buckets[-1]
        parts = [
            self.wait(self.submit(cells[s : s + step], pills[s : s + step], previews[s : s + step]))
            for s in range(0, len(cells), step)
        ]
        if len(parts) == 1:
            return parts[0]
        return Prediction(*(np.concatenate(p) for p in zip(*parts)))


# ------------------------------------------------------------------------------------------------
# One inference process for many search processes


class _Channel(NamedTuple):
    """Shared memory of one worker slot: requests in, answers out."""

    cells: np.ndarray  # uint8[capacity, 8, 16]
    pills: np.ndarray  # uint8[capacity, 2]
    previews: np.ndarray  # uint8[capacity, 2]
    out: np.ndarray  # float32[capacity, OUT_WIDTH]


def _out_offset(capacity: int) -> int:
    return -(-capacity * (K.WIDTH * K.HEIGHT + 4) // 8) * 8  # the float32 answers start 8-aligned


def _channel(shm: shared_memory.SharedMemory, capacity: int) -> _Channel:
    cells = np.ndarray((capacity, K.WIDTH, K.HEIGHT), np.uint8, shm.buf, 0)
    pills = np.ndarray((capacity, 2), np.uint8, shm.buf, cells.nbytes)
    previews = np.ndarray((capacity, 2), np.uint8, shm.buf, cells.nbytes + pills.nbytes)
    out = np.ndarray((capacity, OUT_WIDTH), np.float32, shm.buf, _out_offset(capacity))
    return _Channel(cells, pills, previews, out)


def _channel_bytes(capacity: int) -> int:
    return _out_offset(capacity) + capacity * OUT_WIDTH * 4


class RemoteEvaluator:
    """A search worker's end of an `InferenceServer`: submit/wait/evaluate over shared memory.
    Made in the worker from `InferenceServer.handle(i)`."""

    def __init__(self, handle: dict) -> None:
        self.capacity, self.requests, self.worker = handle["capacity"], handle["requests"], handle["worker"]
        self._shm = [shared_memory.SharedMemory(name=n) for n in handle["shm"]]
        self._channels = [_channel(s, self.capacity) for s in self._shm]
        self._answers = handle["answers"]
        self._next = 0
        self._in_flight: set[int] = set()
        self._done: set[int] = set()  # answered slots not yet collected

    def submit(self, cells: np.ndarray, pills: np.ndarray, previews: np.ndarray) -> Ticket:
        """Send N <= capacity positions to the server through this worker's next slot (two slots: at most
        two requests in flight)."""
        n = len(cells)
        if n > self.capacity:
            raise ValueError(f"submit takes at most {self.capacity} positions, got {n}")
        slot = self._next
        self._next = (slot + 1) % len(self._channels)
        if slot in self._in_flight:
            raise RuntimeError("both slots are in flight: wait for one first")
        ch = self._channels[slot]
        ch.cells[:n], ch.pills[:n], ch.previews[:n] = cells, pills, previews
        self._in_flight.add(slot)
        self.requests.put((self.worker, slot, n))
        return Ticket(0, slot, n)

    def wait(self, ticket: Ticket) -> Prediction:
        """The answer to a submitted request; `RunError` if the server has died."""
        while ticket.slot not in self._done:  # answers may come back in another order than asked
            try:
                slot = self._answers.recv()
            except (EOFError, OSError) as e:  # the server's end closed: it is gone
                raise RunError(f"search worker {self.worker}: the inference server is gone ({e!r})") from None
            self._in_flight.discard(slot)
            self._done.add(slot)
        self._done.discard(ticket.slot)
        return _unpack(self._channels[ticket.slot].out[: ticket.n])

    def evaluate(self, cells: np.ndarray, pills: np.ndarray, previews: np.ndarray) -> Prediction:
        """`submit` then `wait`, in pieces of the capacity (any N)."""
        parts = []
        for s in range(0, len(cells), self.capacity):
            end = s + self.capacity
            parts.append(self.wait(self.submit(cells[s:end], pills[s:end], previews[s:end])))
        return parts[0] if len(parts) == 1 else Prediction(*(np.concatenate(p) for p in zip(*parts)))

    def close(self) -> None:
        for s in self._shm:
            s.close()


def _serve(
    net_state: dict,
    device: str,
    dtype: str,
    buckets: Sequence[int],
    requests: mp.Queue,
    answers: Sequence[Connection],
    shm_names: Sequence[Sequence[str]],
    capacity: int,
    log: mp.Queue | None,
    parent: int | None = None,
) -> None:
    """The inference process: merge pending requests into one batch, evaluate, answer each."""
    die_with_parent(parent)

    net = DrMarioNet(NetConfig.from_dict(net_state["config"]))
    net.load_state_dict(net_state["model"])
    engine = BatchedInference(net, device, dtype=resolve_dtype(dtype), buckets=buckets, slots=2)
    shms = [[shared_memory.SharedMemory(name=n) for n in names] for names in shm_names]
    channels = [[_channel(s, capacity) for s in worker] for worker in shms]
    limit = engine.buckets[-1]
    in_flight: list[tuple[Ticket, list[tuple[int, int, int, int]]]] = []
    carry: list[tuple[int, int, int]] = []  # a request that did not fit the last batch
    last_log = time.perf_counter()
    running = True
    while running or in_flight or carry:
        batch, carry = carry, []
        if running:
            try:  # block only when nothing is on the device or waiting
                item = requests.get(timeout=None if not (in_flight or batch) else 0.0005)
                while True:
                    if item == "stop":
                        running = False
                        break
                    if sum(b[2] for b in batch) + item[2] > limit:
                        carry = [item]
                        break
                    batch.append(item)
                    item = requests.get_nowait()
            except queue.Empty:  # take what came
                pass
        if batch:
            cells = np.concatenate([channels[w][s].cells[:n] for w, s, n in batch])
            pills = np.concatenate([channels[w][s].pills[:n] for w, s, n in batch])
            previews = np.concatenate([channels[w][s].previews[:n] for w, s, n in batch])
            parts, offset = [], 0
            for w, s, n in batch:
                parts.append((w, s, offset, n))
                offset += n
            in_flight.append((engine.submit(cells, pills, previews), parts))
            if len(in_flight) >= 2:  # keep one batch on the device while the next is gathered
                _answer(engine, in_flight.pop(0), channels, answers)
        elif in_flight:
            _answer(engine, in_flight.pop(0), channels, answers)
        if log is not None and time.perf_counter() - last_log > 1.0:
            log.put(engine.stats.row())
            last_log = time.perf_counter()
    if log is not None:
        log.put(engine.stats.row())
    for worker_shms in shms:
        for shm in worker_shms:
            shm.close()


def _answer(
    engine: BatchedInference,
    item: tuple[Ticket, list[tuple[int, int, int, int]]],
    channels: Sequence[Sequence[_Channel]],
    answers: Sequence[Connection],
) -> None:
    ticket, parts = item
    pred = engine.wait(ticket)
    flat = np.stack([pred.won, pred.cleared, pred.duration, *pred.by_outcome()], 1)
    moves = pred.moves.reshape(len(flat), -1)
    for w, s, offset, n in parts:
        ch = channels[w][s]
        ch.out[:n, :SEARCH_VALUES] = flat[offset : offset + n]
        ch.out[:n, SEARCH_VALUES:] = moves[offset : offset + n]
        answers[w].send(s)


class InferenceServer:
    """Start one inference process for `workers` search processes. Use as a context manager;
    `handle(i)` is what worker i passes to `RemoteEvaluator`. Stats rows arrive on `stats_queue`
    (about one a second: positions/s, device busy fraction, batch-size histogram)."""

    def __init__(
        self,
        net: DrMarioNet,
        workers: int,
        *,
        device: str = "cpu",
        dtype: str = "auto",
        capacity: int = 4096,
        buckets: Sequence[int] = (64, 256, 1024, 4096),
    ) -> None:
        if capacity > max(buckets):
            raise ValueError(f"capacity {capacity} must not exceed the largest bucket {max(buckets)}")
        ctx = mp.get_context("spawn")
        self.capacity = capacity
        self.requests = ctx.Queue()
        self.stats_queue = ctx.Queue()
        pipes = [ctx.Pipe(duplex=False) for _ in range(workers)]  # (receive end, send end)
        self._receivers = [r for r, _ in pipes]
        self._shm: list[list[shared_memory.SharedMemory]] = []
        try:  # a block that cannot be made (/dev/shm full) must not leave the ones before it behind
            for _ in range(workers):
                self._shm.append([])
                for _ in range(2):
                    self._shm[-1].append(shared_memory.SharedMemory(create=True, size=_channel_bytes(capacity)))
        except BaseException:
            self._release()
            raise
        state = {"config": net.cfg.to_dict(), "model": {k: v.cpu() for k, v in net.state_dict().items()}}
        names = [[s.name for s in w] for w in self._shm]
        self.process = ctx.Process(
            target=_serve,
            args=(
                state,
                device,
                dtype,
                tuple(buckets),
                self.requests,
                [s for _, s in pipes],
                names,
                capacity,
                self.stats_queue,
                mp.current_process().pid,
            ),
            daemon=True,
        )
        try:
            self.process.start()
        except BaseException:
            self._release()
            raise

    def handle(self, worker: int) -> dict:
        return {
            "capacity": self.capacity,
            "requests": self.requests,
            "answers": self._receivers[worker],
            "shm": [s.name for s in self._shm[worker]],
            "worker": worker,
        }

    def stats(self) -> list[dict]:
        rows = []
        while not self.stats_queue.empty():
            rows.append(self.stats_queue.get())
        return rows

    def close(self, wait_s: float = 60) -> list[dict]:
        """Stop the server (if it still runs; terminated after wait_s) and release the shared
        memory, whatever happened to the server; returns its last stats rows. Safe to call again."""
        rows: list[dict] = []
        try:
            if self.process.is_alive():
                self.requests.put("stop")
                self.process.join(timeout=wait_s)
                if self.process.is_alive():  # stuck: it must not outlive the run
                    self.process.terminate()
                    self.process.join(timeout=10)
            with contextlib.suppress(Exception):  # a server that died may leave a half-written row
                rows = self.stats()
        finally:
            self._release()
        return rows

    def _release(self) -> None:
        """Close and unlink the shared memory blocks (once)."""
        blocks, self._shm = self._shm, []
        for worker in blocks:
            for s in worker:
                with contextlib.suppress(OSError):
                    s.close()
                with contextlib.suppress(FileNotFoundError):
                    s.unlink()

    def __enter__(self) -> InferenceServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
