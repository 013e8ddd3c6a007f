"""Runs that survive kills and refuse what they cannot do: one owner per run directory, children
that die with their parent, shards that prove their content, worker failures named, pipeline
failures that say where the traceback is (issue 13); last, the tiny pipeline run whole by the
installed wheel outside the checkout, and run again from the checkout, killed at random points and
resumed to the wheel's files."""

import ast
import contextlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import nbformat
import numpy as np
import pandas as pd
import psutil
import pytest
from helpers import TINY, ctrl_c_as_in_a_terminal, executed_without_errors
from numba.core.caching import UserProvidedCacheLocator

import drmario.play.selfplay as sp
from drmario.files import (
    LOCK_NAME,
    TEMP_PATTERN,
    RunDirectoryLocked,
    RunError,
    file_sha256,
    lock_holder,
    lock_run_dir,
    remove_stray_temp,
    temp_path,
)
from drmario.kernel_cache import STAMP_NAME, kernel_sources, sources_digest
from drmario.learn.example_files import read_examples, read_sidecar, sidecar_path
from drmario.learn.examples import ExampleError
from drmario.play import shards
from drmario.run import pipeline as P
from drmario.run.cli import main
from drmario.run.pipeline import child_env
from drmario.search import SearchConfig

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "round0-sample" / "examples"
SETTINGS: dict[str, Any] = dict(
    games=6,
    levels=[0, 4],
    seed=3,
    games_per_shard=2,
    epsilon=0.2,  # seeded random moves, so a game played again must draw them again
    search=SearchConfig(mode="expert"),  # the kernels the pipeline tests compile anyway (round0's take minutes)
)


def wait_for(condition, timeout: float, what: str, step: float = 0.1):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def python(code: str, **kwargs) -> subprocess.Popen:
    """A child Python running code, in its own session (so the test can kill its whole tree)."""
    return subprocess.Popen([sys.executable, "-c", code], env=child_env(), start_new_session=True, **kwargs)


def tree(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def command_line(p: psutil.Process) -> list[str]:
    """p's command line, [] once it has ended (a process can end between listing and reading it)."""
    try:
        return p.cmdline()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return []


def alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def kill_tree(proc: subprocess.Popen) -> None:
    procs = tree(proc.pid)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    for p in alive(procs):
        p.kill()


def notebook(path: Path, *sources: str) -> Path:
    """A notebook whose first cell is its parameters cell, then one cell per source."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell('run_dir = ""\nround = 0', metadata={"tags": ["parameters"]})]
    nb.cells += [nbformat.v4.new_code_cell(source) for source in sources]
    nbformat.write(nb, path)
    return path


def fake_notebooks(folder: Path, train: tuple[str, ...]) -> Path:
    """01 and 03 make their products and nothing else (01: the CI profile's round-0 and value games);
    02 runs the given cells."""
    folder.mkdir(parents=True, exist_ok=True)
    games = ["round0/examples/", "round0/selfplay.json", "value_games/examples/", "value_games/selfplay.json"]
    notebook(folder / "01_round0_data.ipynb", MAKE.format(files=games))
    notebook(folder / "02_train.ipynb", *train)
    notebook(folder / "03_analysis.ipynb", MAKE.format(files=["analysis0/arena.csv"]))
    return folder


# a cell that makes files under run_dir: folders (a name ending in /), JSON files that hold {"games": 0} (a
# self-play run of no games, a training result, a gate's record), other files empty
MAKE = (
    "from pathlib import Path\n"
    "for name in {files}:\n"
    "    path = Path(run_dir) / name\n"
    "    path.parent.mkdir(parents=True, exist_ok=True)\n"
    "    if name.endswith('/'):\n"
    "        path.mkdir(exist_ok=True)\n"
    "    else:\n"
    "        path.write_text('{{\"games\": 0}}' if name.endswith('.json') else '')"
)
TRAINED = MAKE.format(  # the training, the CI profile's values refit and the gate
    files=["train0/checkpoints/latest.pt", "train0/train_result.json", "train0/gate.json"]
    + ["train0/values/checkpoints/latest.pt", "train0/values/train_result.json"]
)


# ------------------------------------------------------------------------------------------------
# One owner per run directory


def test_lock_names_its_holder_and_a_stale_lock_is_taken_over(tmp_path):
    run = tmp_path / "run"
    holder = python(
        f"import time; from drmario.files import lock_run_dir; l = lock_run_dir({str(run)!r}, 'trainer'); "
        "print('locked', flush=True); time.sleep(60)",
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert lock_holder(run)["pid"] == holder.pid
        with pytest.raises(RunDirectoryLocked, match=rf"in use by trainer \(pid {holder.pid} on host"):
            lock_run_dir(run, "self-play")
        from drmario.baselines.dqn import DQNConfig, train_dqn
        from drmario.baselines.td import TDConfig, train_td

        for learner, start in (
            ("DQN learner", lambda: train_dqn(DQNConfig(), run)),
            ("TD", lambda: train_td(TDConfig(), run)),
        ):
            with pytest.raises(RunDirectoryLocked, match=rf"this {learner}"):  # refused before touching its files
                start()
    finally:
        kill_tree(holder)
    assert (run / LOCK_NAME).exists() and lock_holder(run) is None  # the file stays, nobody holds it
    reports: list[str] = []
    with lock_run_dir(run, "pipeline", log=reports.append) as lock:
        assert lock.info["pid"] == os.getpid() and lock_holder(run)["owner"] == "pipeline"
    assert len(reports) == 1 and f"stale lock of trainer (pid {holder.pid}" in reports[0]
    assert "that process is gone" in reports[0]
    assert not (run / LOCK_NAME).exists()  # released: the file goes


def test_stray_temp_files_are_removed_except_under_a_live_owner(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "busy").mkdir()
    stray = [temp_path(tmp_path / "x.csv"), temp_path(tmp_path / "a" / "latest.pt")]
    kept = [tmp_path / "a" / "notes.tmp", tmp_path / "a" / "latest.pt", temp_path(tmp_path / "busy" / "y")]
    for path in stray + kept:
        path.write_text("x")
    with lock_run_dir(tmp_path / "busy", "trainer"):
        assert sorted(remove_stray_temp(tmp_path)) == sorted(stray)
    assert all(p.exists() for p in kept) and not any(p.exists() for p in stray)


def test_a_second_pipeline_on_a_run_directory_is_refused_at_once(tmp_path, capsys):
    run = tmp_path / "run"
    args = ["pipeline", "--profile", "ci", "--run-dir", str(run), "--no-progress"]
    for item in TINY:
        args += ["--set", item]
    first = subprocess.Popen(
        [sys.executable, "-m", "drmario", *args],
        env=child_env(),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: (lock_holder(run) or {}).get("pid") == first.pid, 60, "the first pipeline's lock")
        start = time.perf_counter()
        assert main(args) == 2
        # refused without waiting for the lock: a guard against a hang (the first pipeline runs for minutes),
        # not a speed figure, so generous for a loaded machine
        assert time.perf_counter() - start < 30
        err = capsys.readouterr().err
        assert err.startswith("drmario pipeline: error: ") and f"in use by pipeline (pid {first.pid}" in err
    finally:
        kill_tree(first)


def test_a_second_trainer_on_a_run_directory_is_refused(tmp_path, capsys):
    run = tmp_path / "train"
    args = ["train", str(run), str(SAMPLE), "--filters", "8", "--blocks", "1", "--device", "cpu", "--no-progress"]
    first = subprocess.Popen(
        [sys.executable, "-m", "drmario", *args, "--steps", "1000000"],
        env=child_env(),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: (lock_holder(run) or {}).get("pid") == first.pid, 60, "the first trainer's lock")
        assert main([*args, "--steps", "10"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("drmario train: error: ") and f"in use by trainer (pid {first.pid}" in err
    finally:
        kill_tree(first)


def test_selfplay_refuses_a_run_directory_in_use(tmp_path):
    with lock_run_dir(tmp_path, "pipeline"), pytest.raises(RunDirectoryLocked, match="in use by pipeline"):
        sp.generate(sp.SelfPlayConfig(**SETTINGS), tmp_path, progress=False)
    assert not (tmp_path / "selfplay.json").exists()


# ------------------------------------------------------------------------------------------------
# Children die with their parent


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_kernel_and_trainer_die_with_the_pipeline(tmp_path, sig):
    """A pipeline whose 02 runs `train_live` (the trainer in a child of the kernel), killed while
    training: no kernel and no trainer survives it."""
    books = fake_notebooks(
        tmp_path / "books",
        (
            "from drmario.learn.net import NetConfig\nfrom drmario.learn.train import TrainConfig\n"
            "from drmario.run.notebook import train_live\n"
            f"cfg = TrainConfig(data=[{str(SAMPLE)!r}], steps=10**7, net=NetConfig(filters=8, blocks=1), "
            "device='cpu', batch_size=8, log_every=10, eval_every=10**6, checkpoint_every=10**6)\n"
            "train_live(cfg, f'{run_dir}/train0')",
        ),
    )
    run = tmp_path / "run"
    parent = python(
        f"from drmario.run.pipeline import run_pipeline\n"
        f"run_pipeline('ci', {str(run)!r}, notebooks_dir={str(books)!r}, progress=False)",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def trainer():
            return [p for p in alive(tree(parent.pid)) if {"train", "drmario"} <= set(command_line(p))]

        wait_for(trainer, 90, "the trainer")
        wait_for(lambda: lock_holder(run / "train0"), 60, "the trainer's lock")  # in train(), past its imports
        children = alive(tree(parent.pid))
        assert len(children) >= 2  # the kernel and the trainer
        os.kill(parent.pid, sig)  # the pipeline alone: its children get no signal from the test
        parent.wait(10)
        wait_for(lambda: not alive(children), 10, f"{[command_line(p) for p in alive(children)]} to die")
    finally:
        kill_tree(parent)
    wait_for(lambda: lock_holder(run) is None and lock_holder(run / "train0") is None, 5, "the locks to go")


# ------------------------------------------------------------------------------------------------
# Shards that prove their content


def records_without_timings(path: Path) -> list[dict]:
    """The game records of a records file, without their timings (meta.seconds)."""
    out = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        record["meta"].pop("seconds", None)
        out.append(record)
    return out


def shard_bytes(run_dir: Path) -> dict[str, object]:
    """A self-play run's example files (bytes) and game records (without timings)."""
    out: dict[str, object] = {p.name: p.read_bytes() for p in sorted((run_dir / "examples").glob("shard-*.jsonl.gz"))}
    out.update({p.name: records_without_timings(p) for p in sorted((run_dir / "records").glob("*.jsonl"))})
    return out


@pytest.fixture(scope="module")
def whole_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("whole")
    sp.generate(sp.SelfPlayConfig(**SETTINGS), run, progress=False)
    return run


def copy_run(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_shards_carry_the_sha256_of_their_files(whole_run):
    for shard in sorted((whole_run / "examples").glob("*.jsonl.gz")):
        sums = read_sidecar(shard)["sha256"]
        assert {k: sums[k] for k in ("examples", "records")} == {
            "examples": file_sha256(shard),
            "records": file_sha256(shards.records_path(shard)),
        }
        assert set(sums) == {"examples", "records", "sidecar"}  # the sidecar's own content too
        assert shards.shard_problem(shard) is None


@pytest.mark.parametrize(
    "damage", ["cut examples", "cut records", "flip a byte", "legacy cut", "legacy bad crc", "legacy intact"]
)
def test_a_damaged_shard_is_played_again(whole_run, tmp_path, damage):
    run = copy_run(whole_run, tmp_path / "run")
    shard = run / "examples" / "shard-000002.jsonl.gz"
    target = shards.records_path(shard) if damage == "cut records" else shard
    data = target.read_bytes()
    if damage.startswith("legacy"):  # a shard written before the sidecars carried checksums
        side = read_sidecar(shard)
        del side["sha256"]
        sidecar_path(shard).write_text(json.dumps(side))
    if "cut" in damage:
        target.write_bytes(data[: len(data) // 2])
    elif damage == "flip a byte":
        target.write_bytes(data[:100] + bytes([data[100] ^ 1]) + data[101:])
    elif damage == "legacy bad crc":  # every line reads, then the gzip stream fails its check
        target.write_bytes(data[:-8] + bytes([data[-8] ^ 0xFF]) + data[-7:])
    reports: list[str] = []
    sp.generate(sp.SelfPlayConfig(**SETTINGS), run, progress=False, log=reports.append)
    if damage == "legacy intact":
        assert reports == []
    else:
        assert (
            len(reports) == 1
            and reports[0].startswith(f"{shard.name} is damaged: {run}")
            and "2 game(s) are played again" in reports[0]
        )
        assert (shard.parent / (shard.name + ".damaged")).exists()
    assert shard_bytes(run) == shard_bytes(whole_run)
    assert all(shards.shard_problem(s) is None for s in (run / "examples").glob("*.jsonl.gz"))


@pytest.mark.parametrize("compressed", [True, False], ids=["gzip", "plain"])
def test_skip_mode_counts_every_example_it_drops(whole_run, tmp_path, compressed):
    import gzip

    shard = copy_run(whole_run, tmp_path / "run") / "examples" / "shard-000000.jsonl.gz"
    expected = read_sidecar(shard)["examples"]
    data = shard.read_bytes()
    if not compressed:  # the same examples as plain JSON Lines, with the same sidecar
        data = gzip.decompress(data)
        shard.unlink()
        shard = shard.with_name("shard-000000.jsonl")
    shard.write_bytes(data[: len(data) // 2])  # cut: the end of the file is gone
    examples, report = read_examples(shard, on_error="skip")
    assert 0 < len(examples) < expected and len(examples) + report.dropped == expected, str(report)
    with pytest.raises(ExampleError, match="cut short|invalid JSON"):  # the first problem it meets
        read_examples(shard)


# ------------------------------------------------------------------------------------------------
# Worker failures named, in the command line's error format


def kill_when(predicate, what: str) -> threading.Thread:
    """A thread that SIGKILLs the first process predicate() returns (polled)."""

    def run() -> None:
        proc = wait_for(predicate, 120, what, step=0.05)
        proc.kill()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.usefixtures("whole_run")  # the expert's kernels compiled before the workers are timed
def test_a_killed_pool_worker_ends_in_the_cli_error_format(tmp_path, capsys):
    run = tmp_path / "run"
    # the expert at depth 3 (about 0.5 s a game): after the first shard each worker has several left to play
    args = ["generate", str(run), "--no-progress", "--games", "16", "--levels", "[4, 8]", "--seed", "3"]
    args += ["--games-per-shard", "2", "--mode", "expert", "--expert-depth", "3", "--workers", "2"]
    me = psutil.Process()

    def worker():
        if not list((run / "examples").glob("shard-*.jsonl.gz")):
            return None  # the workers are playing: kill one now
        found = [p for p in alive(me.children()) if "spawn_main" in " ".join(command_line(p))]
        return found[0] if found else None

    killer = kill_when(worker, "a self-play worker")
    assert main(args) == 2
    killer.join(1)
    err = capsys.readouterr().err
    assert err.startswith("drmario generate: error: a self-play worker process died abruptly"), err
    assert "unfinished: shard-" in err and "Traceback" not in err
    assert main(args) == 0  # the run resumes
    assert shards.done_games(run) == set(range(16))


def shm_blocks() -> set[str]:
    return {p.name for p in Path("/dev/shm").glob("psm_*")} if Path("/dev/shm").is_dir() else set()


def server_selfplay(tmp_path: Path) -> sp.SelfPlayConfig:
    """Two search workers and an inference server with an untrained tiny network: 40 short games."""
    import torch

    from drmario.learn.checkpoint import save_net
    from drmario.learn.net import DrMarioNet, NetConfig

    torch.manual_seed(0)
    ckpt = save_net(DrMarioNet(NetConfig(filters=8, blocks=1)), tmp_path / "net.pt")
    return sp.SelfPlayConfig(
        games=40,
        levels=[0, 3],
        seed=2,
        games_per_shard=2,
        max_pills=60,
        workers=2,
        inference="server",
        network=str(ckpt),
        search=SearchConfig(mode="puct", simulations=4),
    )


@pytest.fixture(scope="module")
def compiled_search(tmp_path_factory) -> None:
    """The search's kernels compiled here (numba caches them on disk) before a test times its
    workers: from an empty cache, two spawned workers compiling them at once beside the other tests
    outlasted the 120 s a test waits for their first shard."""
    folder = tmp_path_factory.mktemp("compiled")
    cfg = replace(server_selfplay(folder), games=1, workers=1, inference="local")
    sp.generate(cfg, folder / "run", progress=False)


@pytest.mark.usefixtures("compiled_search")
def test_a_dead_inference_server_is_named_and_its_shared_memory_released(tmp_path, monkeypatch):
    from drmario.play import inference

    cfg = server_selfplay(tmp_path)
    servers: list = []
    real = inference.InferenceServer.__init__

    def keep(self, *args, **kwargs):
        real(self, *args, **kwargs)
        servers.append(self)

    monkeypatch.setattr(inference.InferenceServer, "__init__", keep)
    before = shm_blocks()
    run = tmp_path / "run"

    def server():
        if not servers or not list((run / "examples").glob("shard-*.jsonl.gz")):
            return None
        return psutil.Process(servers[0].process.pid)

    killer = kill_when(server, "the inference server")
    with pytest.raises(RunError, match=r"the inference server \(pid \d+\) died \(killed by SIGKILL\)"):
        sp.generate(cfg, run, progress=False)
    killer.join(1)
    assert servers[0]._shm == [] and shm_blocks() <= before  # released by the server's owner, not left to exit
    assert not alive(psutil.Process().children(recursive=True)) or all(
        "resource_tracker" in " ".join(command_line(p)) for p in alive(psutil.Process().children(recursive=True))
    )


# ------------------------------------------------------------------------------------------------
# Pipeline failures: the failing cell, where the traceback is, no truncated notebook


def test_a_failing_cell_names_itself_and_the_trainer_log(tmp_path, capfd):
    log = MAKE.format(files=["train0/train.log"])  # as train_live leaves it
    books = fake_notebooks(tmp_path / "books", (log, "raise RuntimeError('no space left, say')"))
    run = tmp_path / "run"
    with pytest.raises(P.PipelineError) as failure:
        P.run_pipeline("ci", run, notebooks_dir=books, progress=False, log=lambda line: None)
    message = str(failure.value)
    assert message.startswith("02_train (round 0) failed in cell 4 (`raise RuntimeError('no space left, say')`)")
    assert f"the trainer's output, with its traceback if it failed, is in {run / 'train0' / 'train.log'}" in message
    output = run / "notebooks" / "02_train.ipynb"
    assert f"the executed notebook, with the error, is {output}" in message
    nbformat.read(output, as_version=4)  # a whole notebook, with the error in it
    assert not list((run / "notebooks").glob(".*.tmp"))
    err = capfd.readouterr().err
    assert "without encryption" not in err  # no kernel warning per notebook


def test_a_full_disk_leaves_no_truncated_notebook_and_stray_temp_files_go(tmp_path, monkeypatch):
    import errno

    import papermill.engines as engines

    books = fake_notebooks(tmp_path / "books", ("x = 1", TRAINED))
    run = tmp_path / "run"
    real, calls = engines.write_ipynb, []

    def disk_full(nb, path):
        calls.append(path)
        if "02_train" in str(path) and len(calls) > 4:  # 02 fills the disk half way through a write
            Path(path).write_text(nbformat.writes(nb)[:200])
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(nb, path)

    monkeypatch.setattr(engines, "write_ipynb", disk_full)
    with pytest.raises(P.PipelineError, match="No space left on device") as failure:
        P.run_pipeline("ci", run, notebooks_dir=books, progress=False, log=lambda line: None)
    assert "could not be written completely, so none is kept" in str(failure.value)
    assert P.notebook_completed(run / "notebooks" / "01_round0_data.ipynb")
    assert not (run / "notebooks" / "02_train.ipynb").exists()
    assert not list((run / "notebooks").glob(".*.tmp"))
    # a writer killed mid-write leaves a temporary file: the next run removes it, then resumes
    monkeypatch.setattr(engines, "write_ipynb", real)
    stray = temp_path(run / "train0" / "latest.pt")
    stray.parent.mkdir(parents=True)
    stray.write_bytes(b"half a checkpoint")
    lines: list[str] = []
    P.run_pipeline("ci", run, notebooks_dir=books, progress=False, rounds=1, log=lines.append)
    assert not stray.exists() and "removed 1 temporary file(s) left by an interrupted run" in lines
    assert any("01_round0_data (round 0): done already" in line for line in lines)


def test_refused_settings_leave_nothing_and_unfinished_steps_may_change(tmp_path):
    from drmario.settings import SettingsError

    run = tmp_path / "run"
    with pytest.raises(SettingsError, match="train.steps"):
        P.run_pipeline("ci", run, overrides=["train.steps=-5"], progress=False)
    assert not run.exists()
    books = fake_notebooks(tmp_path / "books", ("raise RuntimeError('7 steps? not with this data')",))
    with pytest.raises(P.PipelineError, match="7 steps"):  # a value found wrong only when 02 runs
        P.run_pipeline("ci", run, notebooks_dir=books, overrides=["train.steps=7"], log=lambda line: None)
    assert not (run / LOCK_NAME).exists()
    books = fake_notebooks(tmp_path / "books", ("x = 1",))
    lines: list[str] = []
    with pytest.raises(P.PipelineError, match="did not make"):  # 02 ran this time (it makes nothing here)
        P.run_pipeline("ci", run, notebooks_dir=books, log=lines.append)
    assert "settings changed, none of them binding: train.steps: 7 -> 200" in lines
    with pytest.raises(ValueError, match=r"holds another run \(round0_data.games: 48 -> 4\)"):
        P.run_pipeline("ci", run, notebooks_dir=books, overrides=["round0_data.games=4"])  # 01 finished
    lines.clear()  # how 01 ran may change (its games made on 1 core, the run resumed on 4)
    with pytest.raises(P.PipelineError, match="did not make"):
        P.run_pipeline("ci", run, notebooks_dir=books, overrides=["round0_data.workers=4"], log=lines.append)
    assert "settings changed, none of them binding: round0_data.workers: 1 -> 4" in lines


# ------------------------------------------------------------------------------------------------
# Ctrl-C, a changed byte, a second writer (issue 21)


def tiny_steps(run: Path) -> list[P.Step]:
    from drmario.run.profiles import apply_overrides, load_profile

    return P.plan(apply_overrides(load_profile("ci"), TINY), run)


def test_a_notebook_file_alone_never_makes_a_step_done(whole_run, tmp_path, monkeypatch):
    """Interrupted, papermill still writes the notebook as if it had ended: it is not kept; and a
    completed notebook beside partial self-play (one shard gone) is no finished step either."""
    import papermill as pm

    books = fake_notebooks(tmp_path / "books", (TRAINED,))
    run = tmp_path / "run"

    def interrupted(source, output, **kwargs):  # what papermill leaves when Ctrl-C stops a kernel
        nb = nbformat.read(source, as_version=4)
        nb.metadata["papermill"] = {"end_time": "2026-01-01T00:00:00", "exception": None}
        nbformat.write(nb, output)
        raise KeyboardInterrupt

    monkeypatch.setattr(pm, "execute_notebook", interrupted)
    lines: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        P.run_pipeline("ci", run, notebooks_dir=books, progress=False, log=lines.append)
    assert "interrupted; its notebook is not kept" in lines[-1]
    assert not list((run / "notebooks").iterdir())  # neither the notebook nor its temporary file
    first = tiny_steps(run)[0]
    copy_run(whole_run, run / "round0")
    copy_run(whole_run, run / "value_games")
    nbformat.write(
        nbformat.v4.new_notebook(metadata={"papermill": {"end_time": "now", "exception": None}}), first.output
    )
    assert P.step_done(first)
    (run / "round0" / "examples" / "shard-000002.jsonl.gz").unlink()
    assert not P.step_done(first)
    assert "2 of its 6 games are not written yet (games 2, 3)" in P.step_problem(first)


@pytest.mark.parametrize("sealed", [True, False], ids=["sealed", "unsealed"])
def test_a_changed_game_index_in_a_sidecar_is_found(whole_run, tmp_path, sealed):
    run = copy_run(whole_run, tmp_path / "run")
    shard = run / "examples" / "shard-000000.jsonl.gz"
    side = read_sidecar(shard)
    if not sealed:  # a shard written before sidecars were sealed: no digest covers it
        del side["sha256"]
    side["games"][1]["index"] = 0  # a valid digit changed: game 1 would be played again, twice in training
    sidecar_path(shard).write_text(json.dumps(side, indent=1) + "\n")
    reports: list[str] = []
    sp.generate(sp.SelfPlayConfig(**SETTINGS), run, progress=False, log=reports.append)
    assert len(reports) == 1 and reports[0].startswith(f"{shard.name} is damaged: {sidecar_path(shard)}")
    assert "2 game(s) are played again (games 0, 1;" in reports[0]
    assert shard_bytes(run) == shard_bytes(whole_run)  # the same examples, none twice


@pytest.mark.parametrize("damage", ["flip a byte", "cut short"])
def test_a_damaged_example_cache_is_parsed_again_and_named(tmp_path, damage):
    from drmario.learn.dataset import cache_path, load_examples

    source = tmp_path / "examples.jsonl.gz"
    source.write_bytes(sorted(SAMPLE.glob("*.jsonl.gz"))[0].read_bytes())
    sidecar_path(source).write_bytes(sidecar_path(sorted(SAMPLE.glob("*.jsonl.gz"))[0]).read_bytes())
    first = load_examples(source, progress=False)
    cache = cache_path(source)
    data = cache.read_bytes()
    if damage == "cut short":
        cache.write_bytes(data[: len(data) - 200])
    else:  # inside cells.npy, the first array: the zip's CRC finds it
        cache.write_bytes(data[:300] + bytes([data[300] ^ 0xFF]) + data[301:])
    with pytest.warns(
        UserWarning, match=rf"{cache.name}: damaged cache ignored .*parsed again and the cache rewritten"
    ):
        again = load_examples(source, progress=False)
    assert np.array_equal(again.cells, first.cells) and np.array_equal(again.move_prob, first.move_prob)
    reports: list = []
    load_examples(source, progress=False, reports=reports)  # rewritten: read from the cache, no warning
    assert reports[0].cached and not reports[0].warnings


def test_train_and_generate_inside_a_run_another_process_holds_are_refused(tmp_path, capsys):
    run = tmp_path / "run"
    # the holder's own descendants (a kernel's trainer) work inside its run
    child = f"from drmario.files import lock_run_dir; lock_run_dir({str(run / 'train0')!r}, 'trainer'); print(1)"
    holder = python(
        "import subprocess, sys, time; from drmario.files import lock_run_dir\n"
        f"lock = lock_run_dir({str(run)!r}, 'pipeline')\n"
        f"inner = subprocess.run([sys.executable, '-c', {child!r}], capture_output=True, text=True)\n"
        "print('child', inner.stdout.strip(), inner.stderr[-300:], flush=True)\n"
        "time.sleep(60)",
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = holder.stdout.readline()
        assert line.strip() == "child 1", line
        train = ["train", str(run / "train0"), str(SAMPLE), "--filters", "8", "--blocks", "1", "--steps", "2"]
        generate = ["generate", str(run / "round0"), "--games", "2", "--mode", "expert", "--no-progress"]
        for args in (train + ["--device", "cpu", "--no-progress"], generate):
            assert main(args) == 2
            err = capsys.readouterr().err
            assert f"is inside {run}, which is in use by pipeline (pid {holder.pid}" in err, err
        assert not (run / "train0" / "checkpoints").exists() and not (run / "round0" / "examples").exists()
    finally:
        kill_tree(holder)
    inner = python(
        f"import time; from drmario.files import lock_run_dir; l = lock_run_dir({str(run / 'train0')!r}, 'trainer'); "
        "print('locked', flush=True); time.sleep(60)",
        stdout=subprocess.PIPE,
        text=True,
    )
    try:  # and the other way round: a pipeline around a trainer that is not its own
        assert inner.stdout.readline().strip() == "locked"
        with pytest.raises(RunDirectoryLocked, match=rf"is around {run / 'train0'}, which is in use by trainer"):
            lock_run_dir(run, "pipeline")
        assert lock_holder(run) is None
    finally:
        kill_tree(inner)


def tiny_checkpoints(folder: Path) -> dict[str, Any]:
    """step-000005.pt and latest.pt of a tiny network (the same weights), as training leaves them."""
    import torch

    from drmario.learn.checkpoint import save_checkpoint
    from drmario.learn.net import DrMarioNet, NetConfig

    torch.manual_seed(5)
    net = DrMarioNet(NetConfig(filters=4, blocks=0))
    state = {"net_config": net.cfg.to_dict(), "model": net.state_dict(), "step": 5}
    for name in ("step-000005.pt", "latest.pt"):
        save_checkpoint(folder / name, state)
    return {k: v.clone() for k, v in net.state_dict().items()}


def test_a_damaged_latest_checkpoint_falls_back_to_its_newest_intact_step_when_loaded(tmp_path):
    import torch

    from drmario.learn.checkpoint import CheckpointError, load_net, read_checkpoint, save_checkpoint
    from drmario.learn.net import DrMarioNet, NetConfig
    from drmario.run.agents import make_agent

    weights = tiny_checkpoints(tmp_path / "checkpoints")
    older = DrMarioNet(NetConfig(filters=4, blocks=0))  # an intact older step with other weights
    save_checkpoint(
        tmp_path / "checkpoints" / "step-000002.pt",
        {"net_config": older.cfg.to_dict(), "model": older.state_dict(), "step": 2},
    )
    latest = tmp_path / "checkpoints" / "latest.pt"
    data = latest.read_bytes()
    latest.write_bytes(data[: len(data) // 2])
    with pytest.warns(UserWarning, match=r"latest\.pt cannot be read.*using .*step-000005\.pt instead"):
        net = load_net(latest)
    assert all(torch.equal(net.state_dict()[k], v) for k, v in weights.items())  # the newest, not step 2
    with pytest.warns(UserWarning, match="step-000005.pt instead"):
        make_agent("policy", network=latest)  # what 03's arena and 04's self-play do with the best network
    with pytest.raises(CheckpointError, match="cannot be read"):
        read_checkpoint(latest)  # asked for that file alone: no fallback
    (tmp_path / "checkpoints" / "step-000005.pt").write_bytes(b"damaged too")
    with pytest.warns(UserWarning, match=r"(?s)step-000005\.pt cannot be read.*using .*step-000002\.pt instead"):
        net = load_net(latest)
    assert all(torch.equal(net.state_dict()[k], v) for k, v in older.state_dict().items())
    (tmp_path / "checkpoints" / "step-000002.pt").write_bytes(b"damaged as well")
    with pytest.raises(CheckpointError, match=r"no intact checkpoint in .*latest\.pt cannot be read.*step-000005\.pt"):
        load_net(latest)


def test_a_checkpoint_without_its_digest_is_refused_unless_asked(tmp_path, monkeypatch):
    import torch

    from drmario.learn.checkpoint import UNVERIFIED_ENV, CheckpointError, load_net

    tiny_checkpoints(tmp_path)
    (tmp_path / "step-000005.pt").unlink()  # (with it there, loading latest.pt would fall back to it)
    path = tmp_path / "latest.pt"
    state = torch.load(path, weights_only=True)
    state["digest"] = state.pop("sha256")  # the key renamed ...
    name = next(iter(state["model"]))
    state["model"][name].view(-1)[0] += 1.5  # ... and a weight changed
    torch.save(state, path)
    with pytest.raises(
        CheckpointError, match=rf"{path} has no 'sha256' digest.*unverified=True or .*{UNVERIFIED_ENV}=1"
    ):
        load_net(path)
    assert float(load_net(path, unverified=True).state_dict()[name].view(-1)[0]) == float(
        state["model"][name].view(-1)[0]
    )
    monkeypatch.setenv(UNVERIFIED_ENV, "1")
    load_net(path)


def test_every_integer_setting_has_a_range_its_consumers_take(tmp_path):
    import torch

    from drmario.learn.train import TrainConfig, _permutation
    from drmario.play.lockstep import decision_seed
    from drmario.run.cli import settings_classes
    from drmario.settings import SettingsError, setting_range

    def bound(bounds: dict, *keys: str) -> float:
        found = [bounds[k] for k in keys if bounds[k] is not None]
        return found[0] if found else float("nan")

    unbounded = []
    for cls in settings_classes().values():
        for leaf in cls.leaves():
            bounds = setting_range(leaf.owner, leaf.path.rsplit(".", 1)[-1])
            if "int" in leaf.type_text and not (
                bound(bounds, "le", "lt") <= 2**31 - 1 and bound(bounds, "ge", "gt") >= -(2**31)
            ):
                unbounded.append(f"{leaf.owner.__name__}.{leaf.path}")
    assert not unbounded
    with pytest.raises(SettingsError, match=r"train\.seed = 99999999999999999999999: expected >= 0 and <= 2147483647"):
        P.run_pipeline("ci", tmp_path / "run", overrides=["train.seed=99999999999999999999999"], progress=False)
    assert not (tmp_path / "run").exists()  # refused before 01 ran
    top = 2**31 - 1  # what the seeds' consumers get at most
    torch.manual_seed(TrainConfig(seed=top).seed)
    assert len(_permutation(5, top, top, torch.device("cpu"))) == 5 and decision_seed(top, 10**7, 10**5) >= 0
    assert len(sp.SelfPlayConfig(seed=top, games=2).game_specs()) == 2


def test_unreadable_run_files_are_named_with_what_to_do(tmp_path, whole_run):
    run = tmp_path / "run"
    run.mkdir()
    (run / P.RECORD).write_text("")
    with pytest.raises(ValueError, match=rf"{run / P.RECORD}: cannot read this run's record .*new run directory"):
        P.run_pipeline("ci", run, progress=False, log=lambda line: None)
    profile = tmp_path / "binary.yaml"
    profile.write_bytes(b"\xff\xfe\x00name: x")
    with pytest.raises(ValueError, match=rf"profile {profile}: cannot read it as YAML text: 'utf-8' codec"):
        P.run_pipeline(profile, tmp_path / "other", progress=False)
    # a damaged sidecar whose records are gone too: the games are still counted
    copy = copy_run(whole_run, tmp_path / "selfplay")
    shard = copy / "examples" / "shard-000002.jsonl.gz"
    sidecar_path(shard).write_text(sidecar_path(shard).read_text()[:40])
    shards.records_path(shard).unlink()
    reports: list[str] = []
    sp.generate(sp.SelfPlayConfig(**SETTINGS), copy, progress=False, log=reports.append)
    assert len(reports) == 1 and "cannot read the sidecar" in reports[0]
    assert "its 2 game(s) are played again (games 2, 3;" in reports[0]
    assert shard_bytes(copy) == shard_bytes(whole_run)


@pytest.mark.usefixtures("compiled_search")
def test_a_killed_search_worker_in_server_mode_ends_the_run_at_once(tmp_path, monkeypatch):
    from drmario.play import inference

    close = inference.InferenceServer.close

    def close_without_stop(self, *args, **kwargs):
        """As when the killed worker left the requests queue's lock held: the server's stop never arrives."""
        self.requests = SimpleNamespace(put=lambda item: None)
        return close(self, *args, **kwargs)

    monkeypatch.setattr(inference.InferenceServer, "close", close_without_stop)
    cfg = server_selfplay(tmp_path)
    run, me, killed = tmp_path / "run", psutil.Process(), []

    def worker():
        if not list((run / "examples").glob("shard-*.jsonl.gz")):
            return None
        spawned = sorted(
            (p for p in alive(me.children()) if "spawn_main" in " ".join(command_line(p))),
            key=lambda p: p.create_time(),
        )
        if len(spawned) < 3:  # the inference server first, then the two search workers
            return None
        killed.append(time.monotonic())
        return spawned[1]

    killer = kill_when(worker, "a search worker")
    with pytest.raises(RunError) as failure:
        sp.generate(cfg, run, progress=False)
    killer.join(1)
    # a guard against a hang, not a speed figure: the close path's own waits add up to about 17 s at most
    assert time.monotonic() - killed[0] < 40
    assert re.match(
        r"search worker \d \(killed by SIGKILL\) died while the inference server was running", str(failure.value)
    )
    assert "SIGTERM" not in str(failure.value) and "the other 1 worker(s) were stopped" in str(failure.value)


# ------------------------------------------------------------------------------------------------
# numba's cached kernels follow the package's sources, callees in other files included.

CALLER = """from numba import njit

from pkg.callee import value


@njit(cache=True)
def twice():
    return 2 * value()
"""
CALLEE = """from numba import njit


@njit(cache=True)
def value():
    return {}
"""


@pytest.mark.parametrize("cache_dir", ["", "numba-cache"], ids=["in-tree", "NUMBA_CACHE_DIR"])
def test_stale_kernels_are_dropped_when_any_source_changes(tmp_path, cache_dir):
    """A kernel calling one of another file is compiled once and cached. numba alone would keep
    running the cached caller's copy of the old callee after the callee's file changed; the package's
    stamp of all its sources makes the next process drop the cache and compile the new code, in the
    package's __pycache__ or wherever NUMBA_CACHE_DIR puts numba's cache."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "caller.py").write_text(CALLER)
    (package / "callee.py").write_text(CALLEE.format(1))
    run = (
        "import sys; from pathlib import Path; from drmario.kernel_cache import drop_stale_kernels;"
        "dropped = drop_stale_kernels(Path(sys.argv[1])); from pkg.caller import twice; print(dropped, twice())"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    env.pop("NUMBA_CACHE_DIR", None)
    cache = package / "__pycache__"
    if cache_dir:
        env["NUMBA_CACHE_DIR"] = str(tmp_path / cache_dir)
        cache = tmp_path / cache_dir / UserProvidedCacheLocator.get_suitable_cache_subpath(str(package / "callee.py"))

    def dropped_and_twice() -> str:
        done = subprocess.run([sys.executable, "-c", run, str(package)], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.strip()

    assert dropped_and_twice() == "True 2"  # no stamp yet: nothing cached is trusted
    assert len(list(cache.glob("*.nbi"))) == 2 and len(list(tmp_path.rglob("*.nbi"))) == 2
    assert dropped_and_twice() == "False 2"  # the same sources: the cache is kept
    (package / "callee.py").write_text(CALLEE.format(5))
    assert dropped_and_twice() == "True 10"  # numba's own check would keep the caller's copy of the old callee
    assert dropped_and_twice() == "False 10"
    assert (cache / STAMP_NAME).read_text() == sources_digest(package)
    (package / "notes.py").write_text("")  # a new source counts too
    assert dropped_and_twice() == "True 10"
    assert len(list(tmp_path.rglob("*.nbi"))) == 2  # dropped where they were, and compiled there again
    assert (package / "__pycache__" / STAMP_NAME).is_file() == (not cache_dir)


def drmario_imports(path: Path) -> set[Path]:
    """The package's files that importing `path` runs: each module it imports, and its packages' __init__."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "drmario":
            names |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
        elif isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names if alias.name.split(".")[0] == "drmario"}
    files = set()
    for name in names:
        parts = name.split(".")
        for k in range(1, len(parts) + 1):  # drmario, drmario.search, drmario.search.tree
            stem = ROOT.joinpath(*parts[:k])
            files |= {f for f in (stem.with_suffix(".py"), stem / "__init__.py") if f.is_file()}
    return files


def test_the_hashed_sources_hold_every_kernel_and_all_it_imports():
    """Whatever a kernel can read is in the stamp, so no edit can leave a stale kernel; the modules
    no kernel reaches (runs, plots, play) are left out of it, so editing them costs no recompile."""
    hashed = set(kernel_sources())
    todo = [path for path in (ROOT / "drmario").rglob("*.py") if "@njit" in path.read_text()]
    assert len(todo) >= 10 and set(todo) <= hashed
    reached = set(todo)
    while todo:
        for path in drmario_imports(todo.pop()) - reached:
            reached.add(path)
            todo.append(path)
    assert reached <= hashed, sorted(str(p.relative_to(ROOT)) for p in reached - hashed)
    assert ROOT / "drmario" / "run" / "notebook.py" not in hashed


# The tiny pipeline run whole by the installed wheel, then killed at random points and resumed: the
# same results. Last in this file, so the kernels the tests before it compiled go to the wheel.


def pipeline_cmd(run: Path, python: str = sys.executable) -> list[str]:
    cmd = [python, "-m", "drmario", "pipeline", "--profile", "ci", "--run-dir", str(run), "--no-progress"]
    for item in TINY:
        cmd += ["--set", item]
    return cmd


def results(run: Path) -> dict:
    """What a run made: example files (bytes), records and training rows (without timings), arena."""
    out: dict = shard_bytes(run / "round0")
    metrics = pd.read_csv(run / "train0" / "metrics.csv").drop(columns=["time_s", "samples_per_s"])
    out["metrics"] = metrics.to_csv(index=False).splitlines()  # as text: nan == nan there
    arena = pd.read_csv(run / "analysis0" / "arena.csv").drop(columns=["ms_per_move"])
    out["arena"] = arena.to_csv(index=False).splitlines()
    return out


def python_prints(python: str, code: str, **kwargs) -> str:
    """What `python -c code` prints."""
    return subprocess.run([python, "-c", code], check=True, capture_output=True, text=True, **kwargs).stdout.strip()


def copy_compiled_kernels(checkout: Path, installed: Path) -> None:
    """Give the installed package the kernels the checkout's tests compiled so far, which it would
    otherwise compile again for minutes: the source files are the same, and numba keys its cache on
    a file's place (the cache sits in its __pycache__), modification time and size, so the times go
    over too, and so does the sources' stamp (the same sources: drmario.kernel_cache keeps them). A
    kernel not compiled yet is compiled by the wheel's run as on a fresh install."""
    for cached in [*checkout.rglob("__pycache__/*.nb[ic]"), checkout / "__pycache__" / STAMP_NAME]:
        folder = installed / cached.parent.relative_to(checkout)
        if not folder.parent.is_dir():  # a leftover of a module the package no longer has
            continue
        folder.mkdir(exist_ok=True)
        shutil.copy2(cached, folder / cached.name)
    for source in checkout.rglob("*.py"):
        if (twin := installed / source.relative_to(checkout)).is_file():
            os.utime(twin, ns=(source.stat().st_atime_ns, source.stat().st_mtime_ns))


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> Path:
    """A fresh virtual environment with the kit installed from its wheel (no checkout on its path):
    the pipeline must find its notebooks and profiles without the source tree. Its dependencies
    are this environment's (a .pth line names our site-packages, whose own .pth files, the
    checkout's editable install among them, are not read), so the test spends no minute
    reinstalling torch and Jupyter; `make install` checks the declared dependencies install."""
    base = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(base / "dist"), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    [wheel] = (base / "dist").glob("drmario_kit-*.whl")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    site = python_prints(python, "import sysconfig; print(sysconfig.get_path('purelib'))")
    install = [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", str(wheel)]
    subprocess.run(install, check=True, capture_output=True, timeout=300)
    Path(site, "_drmario_test_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")  # after pip
    assert sources_digest(Path(site) / "drmario") == sources_digest(ROOT / "drmario")  # else it would recompile all
    copy_compiled_kernels(ROOT / "drmario", Path(site) / "drmario")
    return venv


@pytest.fixture(scope="module")
def wheel_run(wheel_venv, tmp_path_factory) -> tuple[Path, dict[str, float]]:
    """The tiny pipeline run whole by the installed wheel, from outside the checkout (the
    interrupted runs' reference), and how long each of its steps took."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    python = str(wheel_venv / "bin" / "python")
    work = tmp_path_factory.mktemp("outside")
    where = python_prints(python, "import drmario; print(drmario.__file__)", cwd=work, env=env)
    assert str(wheel_venv) in where, f"drmario imported from {where} (not the wheel)"
    done = subprocess.run(
        pipeline_cmd(Path("tiny"), python), cwd=work, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    took = {}
    for line in done.stdout.splitlines():
        if ": finished in " in line:
            took[line.split("] ")[1].split(" (")[0]] = float(line.rsplit(" in ", 1)[1].split()[0])
    return work / "tiny", took


@pytest.mark.slow
def test_the_installed_wheel_runs_a_round_from_outside_the_checkout(wheel_run):
    """The wheel's pipeline finds its notebooks, profiles and shipped data without the source tree."""
    run, took = wheel_run
    books = sorted((run / "notebooks").glob("*.ipynb"))
    assert [p.name for p in books] == ["01_round0_data.ipynb", "02_train.ipynb", "03_analysis.ipynb"]
    assert sorted(took) == [p.stem for p in books]
    for path in books:
        executed_without_errors(path)
    assert set(pd.read_csv(run / "analysis0" / "arena.csv")["agent"]) == {"random", "greedy", "policy"}


def interrupt(run: Path, sig: int, rng: random.Random, took: dict[str, float]) -> str:
    """Start the tiny pipeline on run and interrupt it once; say where. SIGINT goes to its process
    group as a terminal's Ctrl-C does: in 01 just after its first shard (the first time, when 01
    is not done), else at a random point of the first step it runs. SIGKILL kills its whole tree at
    once, as an out-of-memory killer or a reboot would, at a random time of what is left to run.
    A run that ends first is not interrupted ("ended")."""
    proc = subprocess.Popen(
        pipeline_cmd(run),
        env={**child_env(), "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=ctrl_c_as_in_a_terminal,
    )
    out: list[str] = []
    try:
        if sig == signal.SIGKILL:
            left = sum(t for step, t in took.items() if not (run / "notebooks" / f"{step}.ipynb").exists())
            at = rng.uniform(1.0, max(2.0, left + 5))  # + the start of the pipeline and its kernels
            reader = threading.Thread(target=lambda: out.extend(proc.stdout), daemon=True)
            reader.start()
            try:
                proc.wait(at)
                return "SIGKILL: ended"
            except subprocess.TimeoutExpired:
                family = [psutil.Process(proc.pid), *tree(proc.pid)]
                for p in alive(family):
                    p.kill()
            proc.wait()
            wait_for(lambda: not alive(family), 10, "the killed tree to be gone")
            return f"SIGKILL at {at:.1f} s"
        running = None
        for line in proc.stdout:
            out.append(line)
            if "(round 0): running" in line:
                running = line.split("] ")[1].split(" (")[0]
                break
        if running is None:
            return "SIGINT: ended"
        if running == "01_round0_data":  # between its shards: where a notebook file alone misled (1 of 4)
            first = run / "round0" / "examples" / "shard-000000.jsonl.gz"
            wait_for(first.exists, 60, "01's first shard", step=0.02)
            delay = rng.uniform(0.0, 0.1)
        else:
            delay = rng.uniform(0.5, max(1.0, took[running]))
        time.sleep(delay)
        os.killpg(proc.pid, signal.SIGINT)
        out += proc.stdout.readlines()
        code = proc.wait(60)
        assert code in (0, -signal.SIGINT, 130), f"{running} +{delay:.2f} s: {''.join(out)[-2000:]}"
        return f"SIGINT in {running} +{delay:.2f} s"
    finally:
        kill_tree(proc)


@pytest.mark.slow
def test_interrupted_at_random_points_the_pipeline_resumes_to_the_same_results(wheel_run, tmp_path):
    """Ctrl-C in 01 just after its first shard, the whole tree killed at a random time after it, then
    Ctrl-C at a random point of the next step: after each, no step is taken for done that is not,
    and the run then ends as the wheel's uninterrupted one (the same files, byte for byte)."""
    whole, took = wheel_run
    seed = int(os.environ.get("DRMARIO_KILL_SEED", time.time_ns() % 2**32))  # set it to replay a failure
    print(f"DRMARIO_KILL_SEED={seed}")  # shown with any failure, an assertion's or not
    rng = random.Random(seed)
    broken, at = tmp_path / "broken", []
    for sig in (signal.SIGINT, signal.SIGKILL, signal.SIGINT):
        try:
            at.append(interrupt(broken, sig, rng, took))
        except AssertionError as failure:  # name the seed that replays it
            raise AssertionError(f"DRMARIO_KILL_SEED={seed}, after {at}: {failure}") from failure
        for step in tiny_steps(broken):  # whatever notebook is there stands for a finished step
            assert not step.output.exists() or P.step_done(step), f"{step.label}: {P.step_problem(step)} ({at})"
    assert at[0].startswith("SIGINT in 01_round0_data"), at
    done = subprocess.run(pipeline_cmd(broken), env=child_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"DRMARIO_KILL_SEED={seed}, interrupted: {at}: {done.stderr[-3000:]}"
    got, want = results(broken), results(whole)
    assert got.keys() == want.keys(), f"DRMARIO_KILL_SEED={seed}, interrupted: {at}"
    for key in want:
        assert got[key] == want[key], f"{key} differs: DRMARIO_KILL_SEED={seed}, interrupted: {at}"
    assert not [p for p in broken.rglob("*") if TEMP_PATTERN.match(p.name)], f"DRMARIO_KILL_SEED={seed}"
    for book in (broken / "notebooks").glob("*.ipynb"):
        assert P.notebook_completed(book)
    assert np.isfinite(pd.read_csv(broken / "train0" / "metrics.csv")["loss"]).all()


def test_an_integer_past_floats_range_for_a_float_setting_is_a_settings_problem():
    from drmario.search.network import PuctSettings
    from drmario.settings import SettingsError

    # math.isfinite(10**400) raises OverflowError: it must come back as the setting's own problem
    with pytest.raises(SettingsError, match=r"PuctSettings: c_puct = 1000.*: expected a finite number"):
        PuctSettings(c_puct=10**400)
    with pytest.raises(SettingsError, match=r"c_puct = .*: expected a finite number"):
        PuctSettings.from_dict({"c_puct": -(10**400)})
    assert PuctSettings(c_puct=10**300).c_puct == 1e300  # a big int inside float's range still converts


def test_a_bool_is_not_a_number_for_an_integer_or_float_setting():
    from drmario.play.selfplay import SelfPlayConfig
    from drmario.search.network import PuctSettings
    from drmario.settings import SettingsError

    # True == 1 in Python: `games: true` in a YAML file must not mean one game
    with pytest.raises(SettingsError, match=r"games = True: expected an integer"):
        SelfPlayConfig(games=True)
    with pytest.raises(SettingsError, match=r"c_puct = False: expected a finite number"):
        PuctSettings.from_dict({"c_puct": False})
    assert SelfPlayConfig(games=np.int64(3)).games == 3 and type(SelfPlayConfig(games=np.int64(3)).games) is int


def test_a_nested_settings_problem_names_its_field_and_the_others_are_named_too():
    from drmario.play.selfplay import SelfPlayConfig
    from drmario.settings import SettingsError

    with pytest.raises(SettingsError) as info:
        SelfPlayConfig(search={"simulations": {"x": 1}}, games=-1)  # a group where a number is wanted, and more
    assert [p.split(":")[0] for p in info.value.problems] == ["games = -1", "search.simulations.x"]
