"""The notebook pipeline: parameter profiles, and the numbered notebooks run by papermill into one
run directory. What the notebooks share lives in `drmario.run.notebook`.

A run directory (``runs/<name>/``) holds::

    pipeline.json            the profile and overrides it was made with (a rerun must match)
    round0/ ... roundN/      self-play data of each round (selfplay.json, examples/, records/)
    value_games/             with 01's value_games: games no training uses, for the values refits
    train0/ ... trainN/      the network trained after each round (config.json, metrics.csv,
                             checkpoints/, train.log, train_result.json; with 02's value_steps,
                             values/: the refit of its value head on the value games, the round's network)
    analysis0/ ...           arena tables and games of each round's network
    notebooks/               the executed notebooks: 01_round0_data.ipynb, 02_train.ipynb,
                             03_analysis.ipynb, then 04_next_round-round1.ipynb, 02_train-round1.ipynb, ...

`run_pipeline` runs 01 -> 02 -> 03, then 04 -> 02 -> 03 for each further round (02 trains on every
round's data so far), and optionally 05 (the baseline learners, against the run's best network). A
profile (``params/*.yaml``) has a ``name`` and one section per notebook, keyed by the notebook's
name without its number (``round0_data``, ``train``, ``analysis``, ``next_round``, ``baselines``),
whose keys are that notebook's parameters. The pipeline sets the paths itself
(``run_dir``, ``round``, and 02's ``data``).

Rerunning into the same run directory resumes: a notebook that completed and left its outputs is
skipped, an interrupted one runs again (and its work resumes: self-play skips the games written,
training continues from its last checkpoint). The settings of the steps that finished or began (a
training with checkpoints, but for what a resumed training may change; a self-play run started) are
binding: a rerun that changes them is refused (use a new run directory), as it would mix two runs;
the settings of the steps still to run may change, and so may those that only say how a step runs
(`HOW_IT_RUNS`: worker processes, torch threads). ``--stop-before 02`` stops a run before its first
training, e.g. to make round 0's games on one machine and resume the run on another with a GPU. A
run directory has one owner: a second pipeline on it is refused at once (`drmario.files.lock_run_dir`),
and the kernels and the trainer it starts die with it.

An executed notebook is written under a temporary name and renamed into place when papermill is
done, so ``notebooks/`` never holds a notebook cut short (by a full disk, a kill) under its real name.
A step is done only when its notebook completed and its outputs are whole (`step_problem`): every
game of its self-play in an intact shard, the training result and the gate's record readable. An
interrupted notebook (Ctrl-C, SIGINT) is not kept; one whose kernel died is kept marked as failed.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from drmario.files import (
    LOCK_NAME,
    RunError,
    holds_weights,
    lock_run_dir,
    parent_death_signal,
    played_network,
    remove_stray_temp,
    temp_path,
    write_atomic,
)
from drmario.play.shards import run_problem
from drmario.run.agents import resolve_checkpoint
from drmario.run.kit import ROOT, kit_dir
from drmario.run.profiles import (
    NOTEBOOKS,
    PATH_PARAMETERS,
    Round0Data,
    TrainNotebook,
    apply_overrides,
    build,
    check_profile,
    check_seeds,
    load_profile,
    section_of,
    section_values,
    unread_settings,
)
from drmario.run.rounds import (
    GATE_FILE,
    analysis_dir,
    best_checkpoint,
    checkpoint_path,
    gated_as_it_is,
    in_run,
    refit_checkpoint,
    round_dir,
    run_best_checkpoint,
    stale_refit,
    train_dir,
    trained_checkpoint,
    value_games_dir,
    values_dir,
)
from drmario.settings import SettingsError, differences

RECORD = "pipeline.json"


class PipelineError(RunError):
    """A notebook of the pipeline failed; the message names it, the failing cell and where the
    traceback is (the executed notebook; for 02 also the trainer's train.log)."""


# ------------------------------------------------------------------------------------------------
# The run directory


def child_env() -> dict[str, str]:
    """The environment for kernels and trainers started from here: when this package runs from a
    checkout, the checkout first on PYTHONPATH (absolute, whatever the child's working directory),
    so that they import this drmario even where it is not installed."""
    env = dict(os.environ)
    if (ROOT / "pyproject.toml").is_file():
        parts = [str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(parts))
    return env


@contextlib.contextmanager
def _environ(env: Mapping[str, str]) -> Iterator[None]:
    """os.environ replaced for the duration (papermill starts kernels with the process's environment)."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


# ------------------------------------------------------------------------------------------------
# Steps


@dataclass(frozen=True)
class Step:
    """One notebook execution of a run."""

    notebook: str  # file stem, e.g. "02_train"
    round: int
    output: Path  # the executed notebook
    parameters: dict[str, Any]
    products: tuple[Path, ...]  # what it leaves; with a completed notebook, the step is done

    @property
    def label(self) -> str:
        if section_of(self.notebook) == "baselines":
            return f"{self.notebook} (the run's best network)"
        return f"{self.notebook} (round {self.round})"


def plan(profile: Mapping[str, Any], run_dir: str | Path, rounds: int = 1, baselines: bool = False) -> list[Step]:
    """The steps of a run: 01 -> 02 -> 03, then 04 -> 02 -> 03 for each round after the first, and
    with baselines, 05 (the DQN and TD learners against the run's best network) at the end."""
    if not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be an integer >= 1, got {rounds!r}")
    run_dir = Path(run_dir).resolve()
    books = run_dir / "notebooks"

    def params(section: str, **fixed: Any) -> dict[str, Any]:
        values = dict(profile.get(section, {}))
        for key in PATH_PARAMETERS:  # relative to where the pipeline was started; a shipped network's name: its file
            if isinstance(values.get(key), str) and values[key] and not Path(values[key]).is_absolute():
                values[key] = str(resolve_checkpoint(values[key]).resolve())
        return {**values, **fixed, "run_dir": str(run_dir)}

    def step(section: str, k: int, products: tuple[Path, ...], **fixed: Any) -> Step:
        notebook = NOTEBOOKS[section].stem
        name = f"{notebook}.ipynb" if k == 0 else f"{notebook}-round{k}.ipynb"
        return Step(notebook, k, books / name, params(section, **fixed), products)

    training, round0 = (build(s, section_values(profile, s), devices=False) for s in ("train", "round0_data"))
    assert isinstance(training, TrainNotebook) and isinstance(round0, Round0Data)
    value_games = bool(round0.value_games)
    value_data = [str(value_games_dir(run_dir) / "examples")] if value_games else []
    steps = [step("round0_data", 0, (round_dir(run_dir, 0) / "examples", *[Path(p) for p in value_data]))]
    for k in range(rounds):
        if k > 0:  # network: the best so far, known once the rounds before are gated (`resolved`)
            steps.append(step("next_round", k, (round_dir(run_dir, k) / "examples",), round=k, network=LATER))
        window = range(1, k + 1) if not training.replay_rounds else range(max(1, k - training.replay_rounds + 1), k + 1)
        data = [str(round_dir(run_dir, j) / "examples") for j in (0, *window)]
        warm = k > 0 and training.warm_start
        shorter = {"steps": training.warm_steps} if warm and training.warm_steps else {}
        folder = train_dir(run_dir, k)
        products: tuple[Path, ...] = (trained_checkpoint(run_dir, k), folder / "train_result.json", folder / GATE_FILE)
        if training.value_steps:
            products += (refit_checkpoint(run_dir, k), values_dir(run_dir, k) / "train_result.json")
        fixed = {"data": data, "init": LATER if warm else None, "value_data": value_data}
        steps.append(step("train", k, products, round=k, **fixed, **shorter))
        steps.append(step("analysis", k, (analysis_dir(run_dir, k) / "arena.csv",), round=k))
    if baselines:
        steps.append(step("baselines", 0, (run_dir / "baselines" / "arena.csv",), checkpoint=LATER))
    return steps


GO_ON = "the same command without --stop-before goes on from here"
LATER = "<the best network so far, when the step starts>"  # a parameter `resolved` fills in


def resolved(step: Step) -> Step:
    """The step with its LATER parameters filled in from the run so far: the best network (the
    newest promoted by its gate) of the rounds before it (for 05: of every round the run holds)."""
    best = str(_network_of(step))
    return replace(step, parameters={k: best if v == LATER else v for k, v in step.parameters.items()})


def _network_of(step: Step) -> Path:
    """The network a LATER parameter stands for (`resolved`)."""
    run_dir = step.parameters["run_dir"]
    if section_of(step.notebook) == "baselines":
        return run_best_checkpoint(run_dir)
    return best_checkpoint(run_dir, step.round)


def notebook_completed(path: str | Path) -> bool:
    """Whether an executed notebook ran to its end without an error (papermill's metadata)."""
    import nbformat

    path = Path(path)
    if not path.is_file():
        return False
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:  # a notebook cut short while being written
        return False
    meta = nb.metadata.get("papermill", {})
    return bool(meta.get("end_time")) and not meta.get("exception")


def step_problem(step: Step) -> str | None:
    """What keeps a step from being done, or None if it is: its executed notebook completed, and
    its outputs are there and whole (a notebook file alone never makes a step done)."""
    if not notebook_completed(step.output):
        return f"{step.output} is missing or did not run to its end"
    missing = [str(p) for p in step.products if not p.exists()]
    if missing:
        return f"it did not make {', '.join(missing)}"
    section = section_of(step.notebook)
    run_dir = step.parameters["run_dir"]
    if section == "analysis":  # 03 played the round's network as it is now (not one replaced since, e.g. by a refit)
        network, arena_file = (
            Path(step.parameters.get("checkpoint") or checkpoint_path(run_dir, step.round)),
            step.products[0],
        )
        played = played_network(arena_file.parent)  # by its weights: file times change when a run is copied
        if played is not None and network.is_file() and not holds_weights(network, played):
            return f"its arena {arena_file} is of other weights than round {step.round}'s network {in_run(network)}"
        if played is None and network.is_file() and network.stat().st_mtime_ns > arena_file.stat().st_mtime_ns:
            return f"round {step.round}'s network {in_run(network)} is newer than its arena {arena_file}"
        return None
    if section == "baselines":  # 05 played the run's best network as it is now (a run moved elsewhere too)
        best, played = _network_of(step), played_network(step.products[0].parent) or {}
        same = holds_weights(best, played)
        if not same or in_run(played.get("checkpoint", "")) != in_run(best):
            return f"it did not play the run's best network as it is now, {in_run(best)}"
        return None
    if section in ("round0_data", "next_round"):  # every game of its runs in an intact shard (`shard_problem`)
        problems = [p for p in (run_problem(examples.parent) for examples in step.products) if p is not None]
        return f"its self-play is incomplete: {'; '.join(problems)}" if problems else None
    if stale_refit(run_dir, step.round):  # 02: its training went on after the values were refitted
        refit = in_run(refit_checkpoint(run_dir, step.round))
        other = "is of other weights than its training's network (or older, from before its record)"
        return f"its values refit {refit} {other}"
    for path in step.products:
        if path.suffix == ".json":  # the training result and the gate's record: whole JSON objects
            try:
                record = json.loads(path.read_text())
            except (OSError, ValueError) as e:
                return f"{path} cannot be read: {e}"
            if not isinstance(record, dict):
                return f"{path} does not hold a JSON object"
            if path.name == GATE_FILE and not gated_as_it_is(run_dir, step.round, record):
                network = checkpoint_path(run_dir, step.round)
                return f"its gate ({path}) judged other weights than {in_run(network)} holds now"
    return None


def step_done(step: Step) -> bool:
    """Whether a step is done (`step_problem`)."""
    return step_problem(step) is None


# Parameters that say how a step runs, not what it makes: a finished step's may change when the run resumes
# (its games made on a 2-core machine, the run resumed on one with 16 cores and a GPU).
HOW_IT_RUNS = frozenset({"workers", "torch_threads", "refresh_s"})


def _what_it_makes(section: Any) -> Any:
    return {k: v for k, v in section.items() if k not in HOW_IT_RUNS} if isinstance(section, dict) else section


def _free_while_begun(section: str, values: Mapping[str, Any]) -> set[str]:
    """The settings of a section whose step began but did not finish that may still change: what
    its trainer lets a resumed training change (`learn.train.RESUMABLE`: steps, device, ...) and the
    gate's and values refit's, which run after it (a self-play's begun run refuses any change)."""
    if section != "train":
        return set()
    from drmario.learn.train import RESUMABLE

    return set(RESUMABLE) | {k for k in values if k.startswith("gate_")} | {"value_steps", "value_lr", "value_data"}


def _begun(step: Step) -> bool:
    """Whether a step not done has begun work that it resumes from (a training's checkpoints, a
    self-play's run: its selfplay.json, written before the first game): other settings then would
    make a mix of two runs."""
    section = section_of(step.notebook)
    if section in ("round0_data", "next_round"):
        return (step.products[0].parent / "selfplay.json").exists()  # products[0]: round{k}/examples
    if section == "train":
        return any(step.products[0].parent.glob("*.pt"))  # products[0]: train{k}/checkpoints/latest.pt
    return False


def _check_run_seeds(profile: Mapping[str, Any], run_dir: Path, rounds: int, log: Callable[[str], None]) -> None:
    """`check_seeds` over every round the run holds or will hold. A run that began with the same
    clash (its pipeline.json, from before the check) goes on with a warning: refusing it would
    leave its rounds unfinishable."""
    try:
        previous = json.loads((run_dir / RECORD).read_text())
        old, recorded = previous["profile"], int(previous.get("rounds", 1))
    except (OSError, ValueError, TypeError, KeyError):  # none, or unreadable: `_claim` says why
        old, recorded = None, 0
    try:
        check_seeds(profile, max(rounds, recorded))
    except SettingsError as clash:
        if isinstance(old, dict):
            try:
                check_seeds(old, max(rounds, recorded))
            except SettingsError as before:
                if before.problems == clash.problems:
                    log(f"warning: {clash}; this run began with them (a new run directory needs other seeds)")
                    return
        raise


def _claim(
    run_dir: Path, profile: Mapping[str, Any], source: str | None, rounds: int, steps: Sequence[Step]
) -> list[str]:
    """Write run_dir/pipeline.json, or check that the run there was made with the same settings
    for every step that finished or began (`_begun`), of this call's steps or any the run has made
    (more rounds, 05) (self-play's rule: resume the same run, refuse another one); the settings of
    steps still to run may change. Returns the changes accepted. A call with none of its steps to run and the same
    settings leaves the record as it is (its code version: the last call's that ran a step or changed
    a setting). Call it holding the run directory's lock, after the settings validated: a refused
    rerun changes nothing."""
    record = run_dir / RECORD
    settings = json.loads(json.dumps(dict(profile)))  # as JSON compares
    accepted: list[str] = []
    if record.exists():
        try:
            previous = json.loads(record.read_text())
            if not isinstance(previous, dict):
                raise ValueError(f"a JSON object was expected, not {type(previous).__name__}")
        except (OSError, ValueError) as e:
            raise ValueError(
                f"{record}: cannot read this run's record of its settings ({e}); it is JSON with the profile the "
                "run was made with (keys profile, source, rounds): restore or mend it to resume this run, or start "
                "again in a new run directory (e.g. --run-dir runs/<new name>)"
            ) from e
        rounds = max(rounds, int(previous.get("rounds", 1)))
        every = plan(profile, run_dir, rounds, True)
        done = [step for step in every if step_done(step)]
        finished = {section_of(step.notebook) for step in done}
        begun = {section_of(step.notebook) for step in every if step not in done and _begun(step)} - finished
        old = previous.get("profile", {})
        binding = []
        for key in sorted((set(old) | set(settings)) & (finished | begun)):
            before, now = _what_it_makes(old.get(key, "<unset>")), _what_it_makes(settings.get(key, "<unset>"))
            if key in begun and isinstance(before, dict) and isinstance(now, dict):
                free = _free_while_begun(key, {**before, **now})
                before, now = ({k: v for k, v in d.items() if k not in free} for d in (before, now))
            binding += differences({key: before}, {key: now})
        if binding:
            raise ValueError(
                f"{run_dir} holds another run ({'; '.join(binding)}); use a new run directory "
                "(e.g. --run-dir runs/<new name>) or the same settings to resume it"
            )
        accepted = differences(old, settings)
        idle = {step.output for step in steps} <= {step.output for step in done}
        if idle and not accepted and rounds == int(previous.get("rounds", 1)):
            return []
    elif run_dir.exists() and any(p.name != LOCK_NAME for p in run_dir.iterdir()):
        raise ValueError(f"{run_dir} is not empty and holds no {RECORD}: not a pipeline run; use a new run directory")
    from drmario.learn.example_files import code_version

    run_dir.mkdir(parents=True, exist_ok=True)
    entry = {
        "profile": settings,
        "source": source,
        "rounds": rounds,
        "updated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **code_version(),
    }
    write_atomic(record, json.dumps(entry, indent=1) + "\n")
    return accepted


@functools.cache
def _kernel_manager_class() -> type:
    """papermill's kernel manager, made to own its kernel: the kernel gets SIGKILL when this
    process dies (also by kill -9; ipykernel's own parent poller takes up to a second), and it
    talks over CurveZMQ-encrypted sockets where the kernelspec supports them, so it does not warn
    "Kernel is running over TCP without encryption" once per notebook."""
    import zmq
    from jupyter_client import AsyncKernelManager  # what nbclient uses

    class OwnedKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            if self.has_trait("transport_encryption") and zmq.has("curve"):
                self.transport_encryption = "auto"  # only where the kernelspec declares support

        async def _async_pre_start_kernel(self, **kw: Any) -> tuple[list[str], dict[str, Any]]:
            cmd, kw = await super()._async_pre_start_kernel(**kw)
            preexec = parent_death_signal()
            if preexec is not None:
                kw["preexec_fn"] = preexec
            return cmd, kw

        async def _async_interrupt_kernel(self) -> None:
            # jupyter_client sends SIGINT before every shutdown request; to the idle kernel of a
            # finished notebook it only makes ipykernel log "ERROR | KeyboardInterrupt caught in
            # kernel" in the pipeline's output. A cell timeout or Ctrl-C still interrupts.
            if not self.shutting_down:
                await super()._async_interrupt_kernel()

    return OwnedKernelManager


def _trace_hint(step: Step) -> str:
    """Where a failing step's traceback is beside its executed notebook: 02's trainer runs in a
    child process whose output, with its traceback, goes to train.log."""
    if step.notebook == NOTEBOOKS["train"].stem:
        log = train_dir(step.parameters["run_dir"], step.round) / "train.log"
        if log.exists():
            return f"the trainer's output, with its traceback if it failed, is in {log}; "
    return ""


def _keep_executed(tmp: Path, output: Path, failed: bool = False) -> bool:
    """Rename the executed notebook tmp to output if it is a whole notebook (else remove it).
    failed: mark it as failed in papermill's metadata (a kernel that died leaves a notebook with an
    end time and no exception), so that it never counts as completed."""
    import nbformat

    try:
        nb = nbformat.read(tmp, as_version=4)
        if failed:
            nb.metadata.setdefault("papermill", {})["exception"] = True
            nbformat.write(nb, tmp)
    except Exception:  # missing, or cut short (a full disk): no pointer to a broken file
        tmp.unlink(missing_ok=True)
        return False
    os.replace(tmp, output)
    return True


def _failing_cell(output: Path, exec_count: int | None) -> str:
    """' (`first line of the cell`)' for the cell numbered exec_count in an executed notebook."""
    import nbformat

    try:
        nb = nbformat.read(output, as_version=4)
        cell = next(c for c in nb.cells if c.get("execution_count") == exec_count and c.cell_type == "code")
    except Exception:
        return ""
    first = next((line.strip() for line in cell.source.splitlines() if line.strip()), "")
    return f" (`{first[:80]}`)" if first else ""


def _execute(step: Step, notebooks_dir: Path, env: Mapping[str, str], progress: bool) -> None:
    """Run one notebook with papermill into step.output (written as a temporary file, renamed at
    the end); PipelineError naming the failing cell and the files with the traceback."""
    import papermill as pm

    step.output.unlink(missing_ok=True)  # an earlier attempt's notebook is no pointer to this one
    tmp = temp_path(step.output)
    try:
        with _environ(env), warnings.catch_warnings():
            # the temporary name does not end in .ipynb, which papermill would warn about
            warnings.filterwarnings("ignore", "The specified file .* does not end in one of", UserWarning)
            pm.execute_notebook(
                str(notebooks_dir / f"{step.notebook}.ipynb"),
                str(tmp),
                parameters=step.parameters,
                kernel_name="python3",
                cwd=str(notebooks_dir),  # where the notebooks' own default paths are meant from
                progress_bar=progress,
                log_output=False,
                kernel_manager_class=_kernel_manager_class(),
            )
    except pm.PapermillExecutionError as e:
        kept = _keep_executed(tmp, step.output)
        where = f"the executed notebook, with the error, is {step.output}" if kept else _lost(step)
        cell = _failing_cell(step.output, e.exec_count) if kept else ""
        raise PipelineError(
            f"{step.label} failed in cell {e.exec_count}{cell}: {e.ename}: {e.evalue}\n{_trace_hint(step)}{where}"
        ) from e
    except Exception as e:  # the kernel died or could not start, the disk is full
        kept = _keep_executed(tmp, step.output, failed=True)
        where = f"the notebook as far as it ran is {step.output}" if kept else _lost(step)
        raise PipelineError(f"{step.label} failed: {type(e).__name__}: {e}\n{_trace_hint(step)}{where}") from e
    except BaseException:  # Ctrl-C, SIGINT: papermill still wrote the notebook as if it had ended
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, step.output)


def _lost(step: Step) -> str:
    return f"the executed notebook could not be written completely, so none is kept at {step.output}"


def run_pipeline(
    profile: str | Path | Mapping[str, Any],
    run_dir: str | Path | None = None,
    *,
    rounds: int = 1,
    baselines: bool = False,
    overrides: Sequence[str] = (),
    stop_before: str | None = None,
    notebooks_dir: str | Path | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> list[Step]:
    """Run the notebooks into run_dir (default ``runs/<profile name>``) with papermill; see the
    module docstring. profile: a YAML/JSON file or a dict; overrides: ``section.parameter=value``;
    stop_before: a notebook's number, name or section (``"02"``, ``"train"``): stop at its first step still to run
    (e.g. make round 0's games on a machine without the GPU the training names, then resume the
    run where the GPU is; only the steps before it need this machine's devices).
    Returns the steps, each executed or found done."""
    source = None
    if not isinstance(profile, Mapping):
        source = str(profile)
        profile = load_profile(profile)
    profile = apply_overrides(profile, overrides)
    check_profile(profile, devices=False)  # before anything is written: a refused profile leaves no trace
    for note in unread_settings(profile):
        log(f"unread setting, {note}")
    notebooks_dir = Path(notebooks_dir or kit_dir("notebooks"))
    run_dir = Path(run_dir or Path("runs") / str(profile["name"])).resolve()
    _check_run_seeds(profile, run_dir, rounds, log)
    steps = plan(profile, run_dir, rounds, baselines)
    ahead = steps
    if stop_before in NOTEBOOKS:  # a section's name: its notebook's (train: 02_train)
        stop_before = NOTEBOOKS[stop_before].stem
    if stop_before is not None:
        stops = [i for i, step in enumerate(steps) if stop_before and step.notebook.startswith(stop_before)]
        if not stops:
            names = ", ".join(dict.fromkeys(step.notebook for step in steps))
            raise ValueError(f"stop_before: no step of this run is notebook {stop_before!r} (its notebooks: {names})")
        ahead = steps[: next((i for i in stops if not step_done(steps[i])), len(steps))]
    check_profile(profile, devices={section_of(step.notebook) for step in ahead})  # the devices of the steps to run
    made = not run_dir.exists()
    with lock_run_dir(run_dir, "pipeline", log=log) as lock:
        try:
            accepted = _claim(run_dir, profile, source, rounds, steps)
        except BaseException:
            lock.release()
            if made:  # a directory this refused run made: leave nothing behind
                with contextlib.suppress(OSError):
                    run_dir.rmdir()
            raise
        if accepted:
            log(f"settings changed, none of them binding: {'; '.join(accepted)}")
        stray = remove_stray_temp(run_dir)  # the children of an interrupted run are dead by now
        if stray:
            log(f"removed {len(stray)} temporary file(s) left by an interrupted run")
        (run_dir / "notebooks").mkdir(exist_ok=True)
        env = child_env()
        for i, step in enumerate(steps, 1):
            where = f"[{i}/{len(steps)}] {step.label}"
            if step_done(step):
                log(f"{where}: done already ({step.output})")
                continue
            if stop_before is not None and step.notebook.startswith(stop_before):
                log(f"{where}: not run (stop before {stop_before}); {GO_ON}")
                break
            step = resolved(step)
            log(f"{where}: running -> {step.output}")
            start = time.perf_counter()
            try:
                _execute(step, notebooks_dir, env, progress)
            except KeyboardInterrupt:
                log(f"{where}: interrupted; its notebook is not kept: run the same command again to resume")
                raise
            problem = step_problem(step)
            if problem is not None:
                raise PipelineError(f"{step.label} completed but {problem}; see {step.output}")
            log(f"{where}: finished in {time.perf_counter() - start:.0f} s")
    return steps


# ------------------------------------------------------------------------------------------------
# Sample data (data/)

SAMPLE_SELFPLAY = {
    "games": 10,
    "levels": [0, 2, 4, 6, 8, 10],
    "seed": 0,
    "games_per_shard": 10,
    "search": {"mode": "expert"},
}


def make_sample_data(data_dir: str | Path = ROOT / "data", *, progress: bool = True) -> Path:
    """(Re)make the committed sample of round-0 examples: data_dir/round0-sample, self-play with
    `SAMPLE_SELFPLAY`. Returns its folder."""
    from drmario.play.selfplay import SelfPlayConfig, generate

    sample = Path(data_dir) / "round0-sample"
    if sample.exists():
        shutil.rmtree(sample)  # remade from scratch, not resumed
    generate(SelfPlayConfig.from_dict(SAMPLE_SELFPLAY), sample, progress=progress)
    return sample
