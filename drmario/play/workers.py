"""Self-play across processes: a pool of search processes, or search processes fed by one
inference server (`inference.InferenceServer`).

Both run shard jobs, `play(cfg_dict, specs, run_dir, *, evaluator=None, on_game=None)` (a
module-level function, so that it pickles: `selfplay.play_shard`), and report each finished game
to the parent's progress bar through a queue. Worker processes die with the process that started
them, and a dead worker or inference server ends the run with a `RunError` that names it; the
shards already written are kept.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, Any

from drmario.files import RunError, append_csv, die_with_parent
from drmario.play.lockstep import GameSpec

if TYPE_CHECKING:
    from multiprocessing.context import SpawnContext

PlayShard = Callable[..., dict]


def shard_names(shards: Sequence[Sequence[GameSpec]]) -> str:
    names = [f"shard-{specs[0].number:06d}" for specs in shards]
    return ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")


def _spawn() -> SpawnContext:
    import multiprocessing

    return multiprocessing.get_context("spawn")


def _quiet_worker(parent: int | None) -> None:
    """A worker process dies with its parent, and its (silent) progress bars take a thread lock,
    not tqdm's default process lock, a named semaphore that a killed worker would leave to the
    resource tracker to clean up (with a "leaked semaphore" warning)."""
    from drmario.progress import tqdm

    die_with_parent(parent)
    tqdm.set_lock(threading.RLock())


_games_done: Any = None  # a pool worker's queue to the parent's progress bar (set by `_pool_start`)


def _pool_start(parent: int | None, games_done: Any) -> None:
    global _games_done
    _games_done = games_done
    _quiet_worker(parent)


def _pool_job(play: PlayShard, cfg_dict: dict, specs: list[GameSpec], run_dir: str) -> dict:
    """One shard in a pool worker, each finished game told to the parent."""
    return play(cfg_dict, specs, run_dir, on_game=lambda: _games_done.put(1))


def _drain(games_done: Any, bar: Any, timeout: float = 0.0) -> None:
    """Move the games the workers finished onto the progress bar (waiting up to timeout for one)."""
    with contextlib.suppress(queue.Empty):
        bar.update(games_done.get(timeout=timeout) if timeout else games_done.get_nowait())
        while True:
            bar.update(games_done.get_nowait())


def run_pool(
    play: PlayShard, cfg_dict: dict, shards: list[list[GameSpec]], run_dir: Path, workers: int, bar: Any
) -> None:
    """`workers` processes, one shard at a time each; a worker that dies (killed, out of memory)
    ends the run with a `RunError` naming the shards left unfinished."""
    ctx = _spawn()
    games_done = ctx.Queue()
    pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_pool_start, initargs=(os.getpid(), games_done))
    futures: dict[Future, list[GameSpec]] = {}
    try:
        futures = {pool.submit(_pool_job, play, cfg_dict, specs, str(run_dir)): specs for specs in shards}
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            _drain(games_done, bar)
            for future in finished:
                try:
                    future.result()  # a worker's error, raised here
                except (BrokenProcessPool, RunError):
                    raise
                except Exception as e:  # a full disk, a bad network file: name the shard it cut short
                    raise RunError(
                        f"self-play {shard_names([futures[future]])} failed: {type(e).__name__}: {e}. The shards "
                        f"written in {run_dir} are kept: mend the cause and run the same command again"
                    ) from e
        _drain(games_done, bar, timeout=0.5)  # the last games' notes may still be in the pipe
    except BrokenProcessPool:
        unfinished = [specs for f, specs in futures.items() if not f.done() or f.exception() is not None]
        raise RunError(
            f"a self-play worker process died abruptly (killed, or out of memory?) while playing; "
            f"unfinished: {shard_names(unfinished)}. The shards written in {run_dir} are kept: "
            "run the same command again to play the rest"
        ) from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _server_job(
    play: PlayShard,
    cfg_dict: dict,
    shards: list[list[GameSpec]],
    run_dir: str,
    handle: dict,
    done: Any,
    parent: int | None = None,
) -> None:
    """A search process fed by the inference server: its shards, each game told to the parent."""
    import torch

    from drmario.play.inference import RemoteEvaluator

    _quiet_worker(parent)
    torch.set_num_threads(1)
    remote = RemoteEvaluator(handle)
    try:
        for specs in shards:
            play(cfg_dict, specs, run_dir, evaluator=remote, on_game=lambda: done.put(1))
    except RunError as e:  # the server is gone: one line (the parent names the cause), no traceback
        print(f"drmario self-play: {e}", file=sys.stderr, flush=True)
        sys.exit(3)
    finally:
        remote.close()


def run_with_server(
    play: PlayShard,
    cfg_dict: dict,
    network: str,
    device: str,
    dtype: str,
    shards: list[list[GameSpec]],
    run_dir: Path,
    workers: int,
    bar: Any,
) -> None:
    """`workers` search processes feed one inference process; its stats go to run_dir/metrics.csv.
    A dead server or worker ends the run with a `RunError` that names it (server first: the workers
    fail when it dies); the shared memory is released either way."""
    from drmario.learn.checkpoint import load_net
    from drmario.play.inference import InferenceServer

    ctx = _spawn()
    done = ctx.Queue()
    metrics = run_dir / "metrics.csv"
    with InferenceServer(load_net(network), workers, device=device, dtype=dtype) as server:
        procs = [
            ctx.Process(
                target=_server_job,
                args=(play, cfg_dict, shards[w::workers], str(run_dir), server.handle(w), done, os.getpid()),
                name=f"search worker {w}",
                daemon=True,  # never outlives this process
            )
            for w in range(workers)
        ]
        failed: list[tuple[str, int | None]] = []  # the workers that died on their own
        try:
            for p in procs:
                p.start()
            server_lost = False
            while any(p.is_alive() for p in procs) or not done.empty():
                with contextlib.suppress(queue.Empty):
                    bar.update(done.get(timeout=0.5))
                for row in server.stats():
                    append_csv(metrics, row)
                if not server.process.is_alive():
                    server_lost = True
                    break
                failed = [(p.name, p.exitcode) for p in procs if p.exitcode]
                if failed:  # a dead worker ends the run now, not when the rest finish
                    break
            if failed:  # stop the others before the server, so none waits on it or reports it gone
                _stop(procs)
                # A worker killed while writing to the requests queue can leave its lock held, so the
                # "stop" may never reach the server: give it moments, not a minute
                server.close(wait_s=2)
                raise RunError(_failure(failed, len(procs), run_dir))
            if server_lost:
                server.process.join(1)
                code = server.process.exitcode
                running = sum(p.is_alive() for p in procs)
                raise RunError(
                    f"the inference server (pid {server.process.pid}) died ({exit_text(code)}) while "
                    f"{running} of {len(procs)} search worker(s) were playing; the shards written in {run_dir} "
                    "are kept: run the same command again to play the rest"
                )
            for row in server.close():
                append_csv(metrics, row)
        finally:
            _stop(procs)
        failed = [(p.name, p.exitcode) for p in procs if p.exitcode]
        if failed:
            raise RunError(_failure(failed, len(procs), run_dir))


def _stop(procs: Sequence[Any]) -> None:
    """Terminate the processes still running and reap them all."""
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(5)


def _failure(failed: Sequence[tuple[str, int | None]], workers: int, run_dir: Path) -> str:
    """The message for search workers that died while the inference server ran."""
    parts = ", ".join(f"{name} ({exit_text(code)})" for name, code in failed)
    others = workers - len(failed)
    trace = (
        "its traceback is in the output above"
        if all(code is not None and code > 0 for _, code in failed)
        else "a process killed by a signal leaves no traceback"
    )
    return (
        f"{parts} died while the inference server was running ({trace}); "
        f"{f'the other {others} worker(s) were stopped; ' if others else ''}"
        f"the shards written in {run_dir} are kept: run the same command again to play the rest"
    )


def exit_text(code: int | None) -> str:
    """'exit code 1', 'killed by SIGKILL' or 'still running' for a process's exitcode."""
    if code is None:
        return "still running"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"
