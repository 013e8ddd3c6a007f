"""The notebook pipeline: parameter profiles, and the numbered notebooks run by papermill into one
run directory (spec/design.md section 4). What the notebooks share lives in `drmario.notebook`.

A run directory (``runs/<name>/``) holds::

    pipeline.json            the profile and overrides it was made with (a rerun must match)
    round0/ ... roundN/      self-play data of each round (selfplay.json, examples/, records/)
    train0/ ... trainN/      the network trained after each round (config.json, metrics.csv,
                             checkpoints/, train.log, train_result.json)
    analysis0/ ...           arena tables and games of each round's network
    notebooks/               the executed notebooks: 01_round0_data.ipynb, 02_train.ipynb,
                             03_analysis.ipynb, then 04_next_round-round1.ipynb, 02_train-round1.ipynb, ...

`run_pipeline` runs 01 -> 02 -> 03, then 04 -> 02 -> 03 for each further round (02 trains on every
round's data so far), and optionally 05 (the baseline learners, against the last network). A
profile (``params/*.yaml``) has a ``name`` and one section per notebook, keyed by the notebook's
name without its number (``round0_data``, ``train``, ``analysis``, ``next_round``, ``baselines``),
whose keys are that notebook's parameters. The pipeline sets the paths itself
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
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .files import write_atomic

ROOT = Path(__file__).resolve().parent.parent  # the checkout: notebooks/, params/, data/
NOTEBOOKS_DIR = ROOT / "notebooks"

# profile section -> notebook (file stem)
SECTIONS = {
    "round0_data": "01_round0_data",
    "train": "02_train",
    "analysis": "03_analysis",
    "next_round": "04_next_round",
    "baselines": "05_baselines",
}
# parameters the pipeline sets itself (a profile may not)
PIPELINE_SET = {
    "round0_data": ("run_dir",),
    "train": ("run_dir", "round", "data"),
    "analysis": ("run_dir", "round"),
    "next_round": ("run_dir", "round"),
    "baselines": ("run_dir", "checkpoint"),
}
# parameters that are paths: a relative path in a profile is taken from the current directory
PATH_PARAMETERS = ("checkpoint", "eval_games")
RECORD = "pipeline.json"


class PipelineError(RuntimeError):
    """A notebook of the pipeline failed; the message names it and its executed copy."""


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


def plan(profile: Mapping[str, Any], run_dir: str | Path, rounds: int = 1, baselines: bool = False) -> list[Step]:
    """The steps of a run: 01 -> 02 -> 03, then 04 -> 02 -> 03 for each round after the first, and
    with baselines, 05 (the DQN and TD learners against the last round's network) at the end."""
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
    if baselines:
        last = str(checkpoint_path(run_dir, rounds - 1))
        steps.append(step("baselines", 0, (run_dir / "baselines" / "arena.csv",), checkpoint=last))
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
    baselines: bool = False,
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
    steps = plan(profile, run_dir, rounds, baselines)
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
