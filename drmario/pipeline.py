"""The notebook pipeline: parameter profiles, the numbered notebooks run by papermill into one run
directory, and the small helpers those notebooks share (spec/design.md section 4).

A run directory (``runs/<name>/``) holds::

    pipeline.json            the profile and overrides it was made with (a rerun must match)
    round0/ ... roundN/      self-play data of each round (selfplay.json, examples/, records/)
    train0/ ... trainN/      the network trained after each round (config.json, metrics.csv,
                             checkpoints/, train.log, train_result.json)
    analysis0/ ...           arena tables and games of each round's network
    notebooks/               the executed notebooks: 01_round0_data.ipynb, 02_train.ipynb,
                             03_analysis.ipynb, then 04_next_round-round1.ipynb, 02_train-round1.ipynb, ...

`run_pipeline` runs 01 -> 02 -> 03, then 04 -> 02 -> 03 for each further round (02 trains on every
round's data so far). A profile (``params/*.yaml``) has a ``name`` and one section per notebook,
keyed by the notebook's name without its number (``round0_data``, ``train``, ``analysis``,
``next_round``), whose keys are that notebook's parameters. The pipeline sets the paths itself
(``run_dir``, ``round``, and 02's ``data``).

Rerunning into the same run directory resumes: a notebook that completed and left its outputs is
skipped, an interrupted one runs again (and its work resumes: self-play skips the games written,
training continues from its last checkpoint). A run directory made with other parameters is refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from .files import write_atomic

if TYPE_CHECKING:
    import pandas as pd

    from .agents import Agent, GameSpec
    from .game import GameRecord
    from .net import Player
    from .search import SearchConfig
    from .train import TrainConfig, TrainResult

ROOT = Path(__file__).resolve().parent.parent  # the checkout: notebooks/, params/, data/
NOTEBOOKS_DIR = ROOT / "notebooks"

# profile section -> notebook (file stem)
SECTIONS = {
    "round0_data": "01_round0_data",
    "train": "02_train",
    "analysis": "03_analysis",
    "next_round": "04_next_round",
}
# parameters the pipeline sets itself (a profile may not)
PIPELINE_SET = {
    "round0_data": ("run_dir",),
    "train": ("run_dir", "round", "data"),
    "analysis": ("run_dir", "round"),
    "next_round": ("run_dir", "round"),
}
# parameters that are paths: a relative path in a profile is taken from the current directory
PATH_PARAMETERS = ("checkpoint", "eval_games")
RECORD = "pipeline.json"
T = TypeVar("T")


class PipelineError(RuntimeError):
    """A notebook of the pipeline failed; the message names it and its executed copy."""


class ParameterError(ValueError):
    """Bad notebook parameters; the message lists every bad one."""


# ------------------------------------------------------------------------------------------------
# The run directory


def round_dir(run_dir: str | Path, round: int) -> Path:
    """Self-play data of a round (round 0: without a network)."""
    return Path(run_dir) / f"round{round}"


def train_dir(run_dir: str | Path, round: int) -> Path:
    """The training run after a round's data."""
    return Path(run_dir) / f"train{round}"


def analysis_dir(run_dir: str | Path, round: int) -> Path:
    return Path(run_dir) / f"analysis{round}"


def checkpoint_path(run_dir: str | Path, round: int) -> Path:
    return train_dir(run_dir, round) / "checkpoints" / "latest.pt"


def child_env() -> dict[str, str]:
    """The environment for kernels and trainers started from here: this checkout first on
    PYTHONPATH (absolute, so it holds whatever the child's working directory), so that they import
    this drmario even where it is not installed."""
    env = dict(os.environ)
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
# Profiles


def notebook_parameters(notebook: str, notebooks_dir: str | Path = NOTEBOOKS_DIR) -> dict[str, dict[str, str]]:
    """The parameters of a notebook (file stem), read from its parameters cell: name ->
    {"type": annotation, "default": source text, "help": comment}."""
    import papermill as pm

    path = Path(notebooks_dir) / f"{notebook}.ipynb"
    if not path.is_file():
        raise FileNotFoundError(f"no notebook {path}")
    return {
        name: {"type": info["inferred_type_name"], "default": info["default"], "help": info["help"]}
        for name, info in pm.inspect_notebook(str(path)).items()
    }


def _fits(value: Any, annotation: str) -> bool:
    """Whether a profile value fits a parameter's annotation (int, float, str, bool, list[...], dict)."""
    base, _, inner = annotation.partition("[")
    if base == "bool":
        return isinstance(value, bool)
    if base == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if base == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if base == "str":
        return isinstance(value, str)
    if base == "dict":
        return isinstance(value, dict)
    if base == "list":
        return isinstance(value, list) and (not inner or all(_fits(v, inner.rstrip("]")) for v in value))
    return True  # an annotation this check does not know


def _section(key: str) -> str:
    """A profile section from its name or its notebook's name ("train" or "02_train")."""
    if key in SECTIONS:
        return key
    for section, notebook in SECTIONS.items():
        if key == notebook:
            return section
    raise ValueError(f"unknown profile section {key!r}: use one of {', '.join(SECTIONS)}")


def load_profile(path: str | Path) -> dict[str, Any]:
    """A profile from YAML (or JSON): ``{"name": ..., section: {parameter: value}}``."""
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ValueError(f"profile {path}: cannot read it: {e}") from e
    if not isinstance(data, dict):
        raise ValueError(f"profile {path}: expected a mapping of a name and sections, got {type(data).__name__}")
    profile: dict[str, Any] = {"name": data.pop("name", path.stem)}
    for key, values in data.items():
        if not isinstance(values, dict):
            raise ValueError(f"profile {path}: section {key!r} must be a mapping of parameters")
        profile[_section(key)] = dict(values)
    return profile


def parse_override(text: str) -> tuple[str, str | None, Any]:
    """``section.parameter=value`` (or ``name=value``) -> (section or "name", parameter, value);
    the value is read as YAML, so ``500``, ``0.1``, ``true``, ``[0, 4]`` and ``null`` are typed."""
    import yaml

    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"override {text!r}: expected section.parameter=value, e.g. train.steps=500")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as e:
        raise ValueError(f"override {text!r}: the value is not valid YAML: {e}") from e
    if key == "name":
        return "name", None, value
    section, dot, parameter = key.partition(".")
    if not dot or not parameter:
        raise ValueError(f"override {text!r}: expected section.parameter=value, e.g. train.steps=500")
    return _section(section), parameter, value


def apply_overrides(profile: Mapping[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """A copy of profile with ``section.parameter=value`` overrides applied."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in profile.items()}
    for text in overrides:
        section, parameter, value = parse_override(text)
        if parameter is None:
            out["name"] = value
        else:
            out.setdefault(section, {})[parameter] = value
    return out


def check_profile(profile: Mapping[str, Any], notebooks_dir: str | Path = NOTEBOOKS_DIR) -> None:
    """Every profile key must be a parameter of its notebook, not one the pipeline sets, and of the
    parameter's type (a YAML ``1e-3`` is a string: write ``1.0e-3``)."""
    problems = []
    for section, notebook in SECTIONS.items():
        values = profile.get(section, {})
        known = notebook_parameters(notebook, notebooks_dir)
        for key, value in values.items():
            if key in PIPELINE_SET[section]:
                problems.append(f"{section}.{key}: set by the pipeline, not by a profile")
            elif key not in known:
                problems.append(f"{section}.{key}: not a parameter of {notebook} (it has: {', '.join(known)})")
            elif not _fits(value, known[key]["type"]):
                problems.append(f"{section}.{key} = {value!r}: expected {known[key]['type']} ({known[key]['help']})")
    if problems:
        raise ValueError(f"profile {profile.get('name')!r}: " + "; ".join(problems))


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
        return f"{self.notebook} (round {self.round})"


def plan(profile: Mapping[str, Any], run_dir: str | Path, rounds: int = 1) -> list[Step]:
    """The steps of a run: 01 -> 02 -> 03, then 04 -> 02 -> 03 for each round after the first."""
    if not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be an integer >= 1, got {rounds!r}")
    run_dir = Path(run_dir).resolve()
    books = run_dir / "notebooks"

    def params(section: str, **fixed: Any) -> dict[str, Any]:
        values = dict(profile.get(section, {}))
        for key in PATH_PARAMETERS:  # relative to where the pipeline was started
            if isinstance(values.get(key), str) and values[key] and not Path(values[key]).is_absolute():
                values[key] = str(Path(values[key]).resolve())
        return {**values, **fixed, "run_dir": str(run_dir)}

    def step(section: str, k: int, products: tuple[Path, ...], **fixed: Any) -> Step:
        notebook = SECTIONS[section]
        name = f"{notebook}.ipynb" if k == 0 else f"{notebook}-round{k}.ipynb"
        return Step(notebook, k, books / name, params(section, **fixed), products)

    steps = [step("round0_data", 0, (round_dir(run_dir, 0) / "examples",))]
    for k in range(rounds):
        if k > 0:
            steps.append(step("next_round", k, (round_dir(run_dir, k) / "examples",), round=k))
        data = [str(round_dir(run_dir, j) / "examples") for j in range(k + 1)]  # every round's data so far
        products = (checkpoint_path(run_dir, k), train_dir(run_dir, k) / "train_result.json")
        steps.append(step("train", k, products, round=k, data=data))
        steps.append(step("analysis", k, (analysis_dir(run_dir, k) / "arena.csv",), round=k))
    return steps


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


def step_done(step: Step) -> bool:
    return notebook_completed(step.output) and all(p.exists() for p in step.products)


def _differences(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "") -> list[str]:
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key, "<unset>"), new.get(key, "<unset>")
        if isinstance(a, dict) and isinstance(b, dict):
            out += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key}: {a!r} -> {b!r}")
    return out


def _claim(run_dir: Path, profile: Mapping[str, Any], source: str | None, rounds: int) -> None:
    """Write run_dir/pipeline.json, or check that the run there was made with the same settings
    (self-play's rule: resume the same run, refuse another one)."""
    record = run_dir / RECORD
    settings = json.loads(json.dumps(dict(profile)))  # as JSON compares
    if record.exists():
        previous = json.loads(record.read_text())
        diff = _differences(previous.get("profile", {}), settings)
        if diff:
            raise ValueError(
                f"{run_dir} holds another run ({'; '.join(diff)}); use a new run directory "
                "(e.g. --run-dir runs/<new name>) or the same settings to resume it"
            )
        rounds = max(rounds, int(previous.get("rounds", 1)))
    elif run_dir.exists() and any(run_dir.iterdir()):
        raise ValueError(f"{run_dir} is not empty and holds no {RECORD}: not a pipeline run; use a new run directory")
    from .examples import code_version

    run_dir.mkdir(parents=True, exist_ok=True)
    entry = {
        "profile": settings,
        "source": source,
        "rounds": rounds,
        "updated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **code_version(),
    }
    write_atomic(record, json.dumps(entry, indent=1) + "\n")


def run_pipeline(
    profile: str | Path | Mapping[str, Any],
    run_dir: str | Path | None = None,
    *,
    rounds: int = 1,
    overrides: Sequence[str] = (),
    notebooks_dir: str | Path = NOTEBOOKS_DIR,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> list[Step]:
    """Run the notebooks into run_dir (default ``runs/<profile name>``) with papermill; see the
    module docstring. profile: a YAML/JSON file or a dict; overrides: ``section.parameter=value``.
    Returns the steps, each executed or found done."""
    import papermill as pm

    source = None
    if not isinstance(profile, Mapping):
        source = str(profile)
        profile = load_profile(profile)
    profile = apply_overrides(profile, overrides)
    check_profile(profile, notebooks_dir)
    run_dir = Path(run_dir or Path("runs") / str(profile["name"])).resolve()
    steps = plan(profile, run_dir, rounds)
    _claim(run_dir, profile, source, rounds)
    (run_dir / "notebooks").mkdir(exist_ok=True)
    env = child_env()
    for i, step in enumerate(steps, 1):
        where = f"[{i}/{len(steps)}] {step.label}"
        if step_done(step):
            log(f"{where}: done already ({step.output})")
            continue
        log(f"{where}: running -> {step.output}")
        start = time.perf_counter()
        try:
            with _environ(env):
                pm.execute_notebook(
                    str(Path(notebooks_dir) / f"{step.notebook}.ipynb"),
                    str(step.output),
                    parameters=step.parameters,
                    kernel_name="python3",
                    cwd=str(notebooks_dir),  # where the notebooks' own default paths are meant from
                    progress_bar=progress,
                    log_output=False,
                )
        except pm.PapermillExecutionError as e:
            raise PipelineError(
                f"{step.label} failed in cell {e.exec_count}: {e.ename}: {e.evalue}\n"
                f"the executed notebook, with the error, is {step.output}"
            ) from e
        except Exception as e:  # the kernel died, could not start, ...
            raise PipelineError(f"{step.label} failed: {type(e).__name__}: {e}\nsee {step.output}") from e
        missing = [str(p) for p in step.products if not p.exists()]
        if missing:
            raise PipelineError(f"{step.label} completed but did not make {', '.join(missing)}; see {step.output}")
        log(f"{where}: finished in {time.perf_counter() - start:.0f} s")
    return steps


# ------------------------------------------------------------------------------------------------
# Notebook helpers: parameters


class ParameterCheck:
    """Checks a notebook's parameters one by one, then raises one `ParameterError` listing every
    bad one (`done`, or `config` which also builds the configuration object)."""

    def __init__(self, notebook: str) -> None:
        self.notebook = notebook
        self.problems: list[str] = []

    def _bad(self, name: str, value: Any, want: str) -> None:
        self.problems.append(f"{name} = {value!r}: {want}")

    @staticmethod
    def _range(value: float, lo: float | None, hi: float | None) -> bool:
        return (lo is None or value >= lo) and (hi is None or value <= hi)

    @staticmethod
    def _bounds(lo: float | None, hi: float | None) -> str:
        if lo is not None and hi is not None:
            return f" in {lo}..{hi}"
        return f" >= {lo}" if lo is not None else f" <= {hi}" if hi is not None else ""

    def integer(self, name: str, value: Any, lo: int | None = None, hi: int | None = None) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not self._range(value, lo, hi):
            self._bad(name, value, f"expected an integer{self._bounds(lo, hi)}")

    def number(self, name: str, value: Any, lo: float | None = None, hi: float | None = None) -> None:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value)
        if not ok or not self._range(value, lo, hi):
            self._bad(name, value, f"expected a number{self._bounds(lo, hi)}")

    def boolean(self, name: str, value: Any) -> None:
        if not isinstance(value, bool):
            self._bad(name, value, "expected True or False")

    def choice(self, name: str, value: Any, choices: Sequence[Any]) -> None:
        if value not in choices:
            self._bad(name, value, f"expected one of {', '.join(map(repr, choices))}")

    def choices(self, name: str, value: Any, choices: Sequence[Any], nonempty: bool = True) -> None:
        if not isinstance(value, (list, tuple)) or (nonempty and not value) or any(v not in choices for v in value):
            self._bad(name, value, f"expected a {'non-empty ' * nonempty}list of {', '.join(map(repr, choices))}")

    def integers(
        self, name: str, value: Any, lo: int | None = None, hi: int | None = None, nonempty: bool = True
    ) -> None:
        ok = isinstance(value, (list, tuple)) and (value or not nonempty)
        ok = ok and all(isinstance(v, int) and not isinstance(v, bool) and self._range(v, lo, hi) for v in value)
        if not ok:
            self._bad(name, value, f"expected a {'non-empty ' * nonempty}list of integers{self._bounds(lo, hi)}")

    def rule(self, ok: bool, name: str, value: Any, want: str) -> None:
        """Any other condition on a parameter (e.g. one that involves two of them)."""
        if not ok:
            self._bad(name, value, want)

    def text(self, name: str, value: Any) -> None:
        if not isinstance(value, str):
            self._bad(name, value, "expected a string")

    def mapping(self, name: str, value: Any) -> None:
        if not isinstance(value, dict):
            self._bad(name, value, "expected a dict")

    def path(self, name: str, value: Any, exists: bool = True, empty_ok: bool = False) -> None:
        """A path (a string); exists: it must exist now; empty_ok: "" is allowed (a default)."""
        if not isinstance(value, (str, os.PathLike)) or (not empty_ok and not str(value)):
            self._bad(name, value, "expected a path")
        elif exists and str(value) and not Path(value).exists():
            self._bad(name, value, f"no such file or folder (from {Path.cwd()})")

    def paths(self, name: str, value: Any, exists: bool = True) -> None:
        if not isinstance(value, (list, tuple)) or not value:
            self._bad(name, value, "expected a non-empty list of paths")
            return
        for i, v in enumerate(value):
            self.path(f"{name}[{i}]", v, exists)

    def done(self) -> None:
        if self.problems:
            lines = "\n  ".join(self.problems)
            raise ParameterError(f"{self.notebook}: bad parameter(s) (fix the parameters cell):\n  {lines}")

    def config(self, build: Callable[[], T]) -> T:
        """`done`, then build the configuration object; its own checks become a ParameterError too."""
        self.done()
        try:
            return build()
        except (TypeError, ValueError) as e:
            raise ParameterError(f"{self.notebook}: the parameters do not make a valid configuration: {e}") from e


def settings_table(settings: Mapping[str, Any]) -> pd.DataFrame:
    """Nested settings (a config's to_dict()) as a one-column table with dotted names."""
    import pandas as pd

    rows: dict[str, str] = {}

    def walk(d: Mapping[str, Any], prefix: str) -> None:
        for key, value in d.items():
            if isinstance(value, Mapping):
                walk(value, f"{prefix}{key}.")
            else:
                rows[f"{prefix}{key}"] = json.dumps(value) if isinstance(value, (list, tuple)) else str(value)

    walk(settings, "")
    return pd.DataFrame({"value": rows})


# ------------------------------------------------------------------------------------------------
# Notebook helpers: training with live curves


def _result_from_json(d: dict) -> TrainResult:
    from .train import TrainResult

    d = dict(d)
    d["run_dir"] = Path(d["run_dir"])
    d["metrics"] = Path(d["metrics"])
    d["checkpoint"] = Path(d["checkpoint"]) if d.get("checkpoint") else None
    return TrainResult(**d)


def result_to_json(result: TrainResult) -> dict:
    d = dict(result.__dict__)
    for key in ("run_dir", "metrics", "checkpoint"):
        d[key] = None if d[key] is None else str(d[key])
    return d


class _LiveCurves:
    """Loss curves of a training run redrawn in place in a notebook (printed lines elsewhere)."""

    def __init__(self, run_dir: Path, steps: int, terms: Sequence[str]) -> None:
        self.run_dir, self.steps, self.terms = run_dir, steps, tuple(terms)
        self.metrics = run_dir / "metrics.csv"
        self.seen: tuple[int, int] | None = None
        self.start = time.perf_counter()
        self.status = self.figure = None
        if _in_kernel():
            from IPython.display import HTML, display

            self.status = display(HTML("starting the trainer ..."), display_id=True)
            self.figure = display(HTML(""), display_id=True)

    def update(self, force: bool = False) -> None:
        from .viz_plots import plot_curves, read_metrics

        stamp = (self.metrics.stat().st_size, self.metrics.stat().st_mtime_ns) if self.metrics.exists() else None
        if stamp is None or (stamp == self.seen and not force):
            return
        try:
            df = read_metrics({self.run_dir.name: self.metrics})
        except Exception:  # a row being appended right now: try again next time
            return
        self.seen = stamp
        if df.empty:
            return
        last = df.iloc[-1]
        test = df[df["split"] == "test"]
        text = f"step {int(last['step']):,}/{self.steps:,} · loss {df[df['split'] == 'train']['loss'].iloc[-1]:.4g}"
        if len(test):
            text += f" (test {test['loss'].iloc[-1]:.4g})"
        text += f" · {last['samples_per_s']:,.0f} samples/s · {time.perf_counter() - self.start:.0f} s"
        if self.status is None:
            print(text, flush=True)
            return
        from IPython.display import HTML

        self.status.update(HTML(f"<b>training</b> {text}"))
        self.figure.update(plot_curves(df, terms=self.terms))


def _in_kernel() -> bool:
    if "IPython" not in sys.modules:
        return False
    from IPython import get_ipython

    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


def train_live(
    cfg: TrainConfig,
    run_dir: str | Path,
    *,
    refresh_s: float = 2.0,
    terms: Sequence[str] = ("loss", "moves", "won", "cleared", "duration"),
    threads: int = 0,
) -> TrainResult:
    """`train.train` in a child process (``python -m drmario train``), with its loss curves redrawn
    every refresh_s seconds from metrics.csv while it runs. The child's output goes to
    run_dir/train.log. Interrupting stops the child; running again resumes from its last checkpoint.
    threads: torch's CPU threads in the child (0: its default, every core).

    Returns the TrainResult (``stopped`` says why training stopped early, e.g. a non-finite loss).
    Raises RuntimeError, with the end of the log, if the trainer fails otherwise.
    """
    from dataclasses import replace

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    request, result_path, log_path = (
        run_dir / "train-request.json",
        run_dir / "train_result.json",
        run_dir / "train.log",
    )
    child_cfg = replace(cfg, progress=False, data=[str(Path(p).resolve()) for p in cfg.data])
    write_atomic(request, json.dumps(child_cfg.to_dict(), indent=1) + "\n")
    result_path.unlink(missing_ok=True)
    view = _LiveCurves(run_dir, cfg.steps, terms)
    cmd = [sys.executable, "-m", "drmario", "train", str(run_dir), "--config", str(request), "--threads", str(threads)]
    with open(log_path, "a") as log:
        log.write(f"\n# {datetime.now(timezone.utc).isoformat(timespec='seconds')}: {' '.join(cmd)}\n")
        log.flush()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=child_env())
        try:
            while True:
                try:
                    code = proc.wait(timeout=refresh_s)
                    break
                except subprocess.TimeoutExpired:
                    view.update()
        except BaseException:  # an interrupted cell: stop the trainer too (it resumes next time)
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
    view.update(force=True)
    request.unlink(missing_ok=True)
    if result_path.exists() and code in (0, 3):
        return _result_from_json(json.loads(result_path.read_text()))
    tail = "".join(log_path.read_text().splitlines(keepends=True)[-25:])
    raise RuntimeError(f"training in {run_dir} failed (exit code {code}); the end of {log_path}:\n{tail}")


# ------------------------------------------------------------------------------------------------
# Notebook helpers: agents, outcomes, errors

AGENTS = ("random", "greedy", "mcts-round0", "net-policy", "net+mcts")


def make_agents(
    names: Sequence[str], player: Player | None, round0: SearchConfig, network_search: SearchConfig
) -> list[Agent]:
    """The arena's agents by name (`AGENTS`): random, greedy, round-0 MCTS (no network), the
    network's move output alone, and the network with MCTS."""
    from .agents import GreedyAgent, PolicyAgent, RandomAgent, SearchAgent

    out: list[Agent] = []
    for name in names:
        if name in ("net-policy", "net+mcts") and player is None:
            raise ValueError(f"agent {name!r} needs a network")
        if name == "random":
            out.append(RandomAgent())
        elif name == "greedy":
            out.append(GreedyAgent())
        elif name == "mcts-round0":
            out.append(SearchAgent(round0, name=name))
        elif name == "net-policy":
            out.append(PolicyAgent(player, name=name))
        elif name == "net+mcts":
            out.append(SearchAgent(network_search, player, name=name))
        else:
            raise ValueError(f"unknown agent {name!r}: use {', '.join(AGENTS)}")
    return out


def played_positions(records: Iterable[GameRecord]) -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
    """Every decision of the finished games, with what really followed it, counted as the training
    targets count them: cells uint8[N, 8, 16], pills uint8[N, 2], and a table (agent, game, seed,
    level, step, won, cleared, duration, move_r, move_x, move_y)."""
    import pandas as pd

    from .examples import won_target

    cells, pills, rows = [], [], []
    for rec in records:
        if rec.outcome is None:
            continue
        steps = list(rec.steps())
        later = np.cumsum([result.viruses_cleared for _, _, result in steps][::-1])[::-1]
        for i, (game, move, _) in enumerate(steps):
            cells.append(game.board.cells)
            pills.append((int(game.pill.left), int(game.pill.right)))
            rows.append(
                {
                    "agent": rec.meta.get("agent", "?"),
                    "game": rec.meta.get("index", -1),
                    "seed": rec.seed,
                    "level": rec.level,
                    "step": i,
                    "won": won_target(rec.outcome),
                    "cleared": int(later[i]),
                    "duration": len(steps) - i,
                    "move_r": move.r,
                    "move_x": move.x,
                    "move_y": move.y,
                }
            )
    if not rows:
        return np.zeros((0, 8, 16), np.uint8), np.zeros((0, 2), np.uint8), pd.DataFrame(rows)
    return np.stack(cells).astype(np.uint8), np.array(pills, np.uint8), pd.DataFrame(rows)


def record_positions(record: GameRecord) -> tuple[np.ndarray, np.ndarray]:
    """The positions of every decision of a game, finished or not: cells uint8[n, 8, 16], pills uint8[n, 2]."""
    cells = [game.board.cells for game, _, _ in record.steps()]
    pills = [(int(game.pill.left), int(game.pill.right)) for game, _, _ in record.steps()]
    return np.array(cells, np.uint8).reshape(-1, 8, 16), np.array(pills, np.uint8).reshape(-1, 2)


def predict(player: Player, cells: np.ndarray, pills: np.ndarray):
    """The network at these positions with its moves masked to the legal ones (`net.NetPrediction`)."""
    from . import kernels as K

    legal = np.zeros((len(cells), 4, K.WIDTH, K.HEIGHT), np.uint8)
    if len(cells):
        K.legal_masks_batch(np.ascontiguousarray(cells), np.ascontiguousarray(pills), legal)
    return player.evaluate(cells, pills, legal.astype(bool))


def network_errors(
    player: Player, cells: np.ndarray, pills: np.ndarray, table: pd.DataFrame
) -> tuple[pd.DataFrame, np.ndarray]:
    """The network's predictions at played positions beside what followed (`played_positions`),
    with each value term of the loss per position (err_won, err_cleared, err_duration and their
    sum err_value). Returns (table, moves float[N, 4, 8, 16] masked to legal moves)."""
    pred = predict(player, cells, pills)
    out = table.copy()
    out["pred_won"], out["pred_cleared"], out["pred_duration"] = pred.won, pred.cleared, pred.duration
    out["err_won"] = (out["pred_won"] - out["won"]) ** 2
    for term in ("cleared", "duration"):
        out[f"err_{term}"] = ((out[f"pred_{term}"] - out[term]) / out[term].clip(lower=1)) ** 2
    out["err_value"] = out["err_won"] + out["err_cleared"] + out["err_duration"]
    return out, pred.moves


def pick_games(games: Sequence[GameSpec], levels: Sequence[int] = (), per_level: int = 0) -> list[GameSpec]:
    """The games at levels (all if empty), at most per_level of each (all if 0), in file order."""
    kept: list[GameSpec] = []
    count: dict[int, int] = {}
    for g in games:
        if (not levels or g.level in levels) and (not per_level or count.get(g.level, 0) < per_level):
            kept.append(g)
            count[g.level] = count.get(g.level, 0) + 1
    return kept


def replay_with_search(
    agent: Agent, spec: GameSpec, *, base_seed: int = 0, stall_limit: int | None = 20, max_pills: int = 1000
) -> tuple[GameRecord, list[np.ndarray | None]]:
    """Play one game with agent (as the arena does, same seeds) and keep each decision's search
    target (None for agents without a search)."""
    from .agents import play_lockstep

    kept: dict[str, Any] = {}

    def keep(record: GameRecord, decisions: list) -> None:
        kept["record"], kept["targets"] = record, [d.target for d in decisions]

    play_lockstep(
        agent, [spec], lockstep=1, base_seed=base_seed, stall_limit=stall_limit, max_pills=max_pills, on_finish=keep
    )
    return kept["record"], kept["targets"]


def rounds_table(run_dir: str | Path) -> pd.DataFrame:
    """One row per self-play round found in run_dir: games, positions, wins, top outs, stalemates,
    viruses cleared, pills per virus, and the search that made it."""
    import pandas as pd

    from .selfplay import summary

    rows = []
    k = 0
    while (round_dir(run_dir, k) / "selfplay.json").exists():
        table = summary(round_dir(run_dir, k))
        settings = json.loads((round_dir(run_dir, k) / "selfplay.json").read_text())
        if not table.empty:
            row = table.loc["all"].to_dict()
            search = settings["search"]
            row["search"] = f"{search['mode']}, {search['simulations']} simulations"
            row["network"] = Path(settings["network"]).parent.parent.name if settings.get("network") else "-"
            rows.append({"round": k, **row})
        k += 1
    if not rows:
        return pd.DataFrame()
    df = pd.DataFrame(rows).set_index("round")
    counts = [c for c in df.columns if c not in ("pills_per_virus", "search", "network")]
    return df.astype({c: int for c in counts})


def arena_by_round(run_dir: str | Path, agents: Sequence[str] = ("net-policy", "net+mcts")) -> pd.DataFrame:
    """The arena tables of every analysed round: the network agents once per round (named
    "<agent> r<k>"), the agents without a network from the first table that has them."""
    import pandas as pd

    frames, seen = [], set()
    k = 0
    while train_dir(run_dir, k).exists():
        path = analysis_dir(run_dir, k) / "arena.csv"
        if path.exists():
            df = pd.read_csv(path)
            mine = df["agent"].isin(agents)
            rounds = df[mine].assign(agent=df.loc[mine, "agent"] + f" r{k}")
            others = df[~mine & ~df["agent"].isin(seen)]
            seen.update(others["agent"])
            frames += [others, rounds]
        k += 1
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


# ------------------------------------------------------------------------------------------------
# Sample data (data/)

SAMPLE_SELFPLAY = {
    "games": 10,
    "levels": [0, 2, 4, 6, 8, 10],
    "seed": 0,
    "games_per_shard": 10,
    "search": {"mode": "round0", "simulations": 32, "root_rollouts": 1},
}
EVAL_LEVELS = list(range(0, 21, 2))  # the fixed evaluation games: 10 per level
EVAL_GAMES_PER_LEVEL = 10
EVAL_SEED = 2024


def make_sample_data(data_dir: str | Path = ROOT / "data", *, progress: bool = True) -> dict[str, Path]:
    """(Re)make the committed sample: round-0 examples in data_dir/round0-sample (self-play with
    `SAMPLE_SELFPLAY`) and the fixed evaluation games data_dir/eval_games.json."""
    from .arena import evaluation_games, save_games
    from .selfplay import SelfPlayConfig, generate

    data_dir = Path(data_dir)
    sample = data_dir / "round0-sample"
    if sample.exists():
        shutil.rmtree(sample)  # remade from scratch, not resumed
    generate(SelfPlayConfig.from_dict(json.loads(json.dumps(SAMPLE_SELFPLAY))), sample, progress=progress)
    games = data_dir / "eval_games.json"
    tmp = games.with_name(f".{games.name}.tmp")
    save_games(evaluation_games(EVAL_LEVELS, EVAL_GAMES_PER_LEVEL, seed=EVAL_SEED), tmp)
    os.replace(tmp, games)
    return {"examples": sample, "eval_games": games}
