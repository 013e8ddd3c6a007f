"""Notebook parameters and pipeline profiles: one settings class per notebook, the only place
its parameters are defined.

A notebook's parameters cell assigns some of its class's leaf settings (`Settings.leaves`: the
component settings flattened, e.g. 01's ``simulations`` is ``selfplay.search.simulations``), and the
next cell builds the settings with `notebook_settings`, which checks every value's type and range
and reports every bad one at once. A pipeline profile's section (``params/*.yaml``) is the same flat
mapping for the same class, so profiles, ``--set`` overrides and notebooks are checked alike, before
anything runs; a test checks that every parameters cell names real settings with their types.
"""

from __future__ import annotations

import ast
import copy
import difflib
import functools
import json
import types
import typing
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

from drmario.baselines import DQNConfig, TDConfig
from drmario.learn.device import cpu_bf16_problem, device_problem, resolve_device
from drmario.learn.train import TrainConfig
from drmario.play.arena import EvalConfig
from drmario.play.gate import GateConfig
from drmario.play.selfplay import SelfPlayConfig
from drmario.run.agents import NETWORK_KINDS, agent_name, parse_spec
from drmario.run.kit import kit_dir, profile_path
from drmario.run.rounds import BEST
from drmario.search.config import NO_NETWORK, SearchConfig
from drmario.settings import (
    SettingInfo,
    Settings,
    SettingsError,
    apply_dotted,
    load_yaml,
    read_value,
    setting,
    split_assignment,
    type_text,
)

RUN_DIR_DOC = "run directory (the pipeline sets it)"
THREADS_DOC = "CPU threads for torch (0: every core); 1 is fastest for small networks"


def _agent_problems(name: str, specs: list[str]) -> list[str]:
    problems = []
    for spec in specs:
        try:
            parse_spec(spec)
        except ValueError as e:
            problems.append(f"{name}: {e}")
    return problems


@dataclass(frozen=True)
class Round0Data(Settings):
    """01_round0_data: round-0 self-play (no network) written as training examples."""

    run_dir: str = setting("../runs/notebooks", RUN_DIR_DOC + "; the examples go to {run_dir}/round0")
    selfplay: SelfPlayConfig = setting(
        SelfPlayConfig(search=SearchConfig(mode="expert")), "the self-play: the expert (default) or MCTS with rollouts"
    )
    value_games: int = setting(
        0,
        "games played as the round-0 games are, with their own seed, that no training uses: each round's value head "
        "is refitted on them (02's value_steps); 0: none",
        ge=0,
        le=10**7,
    )
    value_seed: int = setting(1000, "the value games' seed (apart from seed and from every round's seed + round)", ge=0)
    show_examples: int = setting(3, "example positions drawn with their move targets", ge=0, le=64)
    replay_game: int = setting(0, "index of the game drawn as a replay", ge=0)

    def value_games_config(self) -> SelfPlayConfig | None:
        """The value games' self-play (None without value games)."""
        if not self.value_games:
            return None
        return self.selfplay.replace(games=self.value_games, seed=self.value_seed)

    def unread(self) -> dict[str, str]:
        """`Settings.unread`: the value games' seed without value games."""
        return super().unread() | ({} if self.value_games else {"value_seed": "not read with value_games = 0"})

    def check(self) -> list[str]:
        problems = []
        if self.value_games and self.value_seed == self.selfplay.seed:
            problems.append(f"value_seed = {self.value_seed}: the round-0 games' seed; the value games need their own")
        if self.selfplay.search.mode not in NO_NETWORK:
            problems.append(f"mode = {self.selfplay.search.mode!r}: round-0 data is made without a network")
        if self.replay_game >= self.selfplay.games:
            problems.append(f"replay_game = {self.replay_game}: expected < games ({self.selfplay.games})")
        return problems


@dataclass(frozen=True)
class TrainNotebook(Settings):
    """02_train: training the network on the rounds' examples, then the gate."""

    run_dir: str = setting("../runs/notebooks", RUN_DIR_DOC + "; the network goes to {run_dir}/train{round}")
    round: int = setting(0, "the self-play round this training follows (names the folder train{round})", ge=0)
    train: TrainConfig = setting(TrainConfig(), "the training run (data: the rounds' examples)")
    replay_rounds: int = setting(
        0, "the pipeline trains on round 0's examples and this many newest self-play rounds' (0: every round)", ge=0
    )
    warm_start: bool = setting(
        False, "the pipeline starts rounds after 0 from the best network so far (init), not from fresh weights"
    )
    warm_steps: int = setting(0, "optimiser steps of a warm-started round (0: steps, as round 0)", ge=0)
    value_data: list[str] = setting([], "the value games' examples (the pipeline sets 01's value games)")
    value_steps: int = setting(
        0,
        "after training, optimiser steps of the values refit on value_data (learn: values; the moves output stays "
        "the training's; warm-up: the first tenth); 0: no refit",
        ge=0,
        le=10**8,
    )
    value_lr: float = setting(0.001, "peak learning rate of the values refit", gt=0, le=10)
    gate: GateConfig = setting(GateConfig(), "the gate: the new network against the best so far", prefix=True)
    refresh_s: float = setting(2.0, "seconds between redraws of the live curves", ge=0.1, le=3600)
    torch_threads: int = setting(1, THREADS_DOC, ge=0, le=1024)

    def values_refit(self, checkpoint: str | Path) -> TrainConfig | None:
        """The values refit of the network trained at checkpoint (None when value_steps is 0): the
        training's settings, on value_data, from that network, only the value head learning, with
        AdamW (value_lr is its rate) on the games' own targets (no bootstrap), as measured."""
        if not self.value_steps:
            return None
        return self.train.replace(
            data=list(self.value_data),
            init=str(checkpoint),
            learn="values",
            optimizer="adamw",
            bootstrap=0.0,
            steps=self.value_steps,
            lr=self.value_lr,
            warmup_steps=self.value_steps // 10,
            schedule="cosine",
        )

    def check(self) -> list[str]:
        problems = [] if self.train.data else ["data = []: expected example files or folders"]
        if self.value_steps and not self.value_data:
            problems.append(f"value_steps = {self.value_steps}: needs value_data (01's value_games, in a pipeline)")
        if self.value_steps and self.train.net.head == "design":
            problems.append("value_steps: head 'design' is one layer shared by the moves and the values")
        try:  # checked now, not once the round's self-play and training are done
            kind, _, path = parse_spec(self.gate.agent)
        except ValueError as e:
            problems.append(f"gate_agent: {e}")
        else:  # an agent without a network, or with its own, would play alike for both networks: a tie
            if kind not in NETWORK_KINDS or path is not None:
                problems.append(
                    f"gate_agent = {self.gate.agent!r}: the gate plays each network as one agent: "
                    f"{', '.join(NETWORK_KINDS)} (with -N simulations for a search), without @PATH"
                )
        return problems


@dataclass(frozen=True)
class AnalysisNotebook(Settings):
    """03_analysis: the network in the arena, one game step by step, calibration, its worst errors."""

    run_dir: str = setting("../runs/notebooks", RUN_DIR_DOC + "; the tables go to {run_dir}/analysis{round}")
    round: int = setting(0, "whose network to analyse: the one trained after round {round}", ge=0)
    checkpoint: str = setting(
        "",
        "network checkpoint, a path or a shipped name ('': round {round}'s network, its values refit's if it has one)",
    )
    agents: list[str] = setting(
        ["random", "greedy", "mcts-16", "policy", "net-mcts-16"], "arena players (`drmario.run.agents`)"
    )
    evaluation: EvalConfig = setting(EvalConfig(), "the evaluation protocol")
    reuse_baselines: bool = setting(
        True, "agents without a network that an earlier round's analysis played are not played again"
    )
    device: str = setting("auto", "where the network runs: auto (cuda if available), cpu, cuda")
    torch_threads: int = setting(1, THREADS_DOC, ge=0, le=1024)
    replay_game: int = setting(-1, "index of the evaluation game replayed step by step (-1: the longest)", ge=-1)
    calibration_agents: list[str] = setting(["net-mcts-16"], "whose games the value outputs are checked on")
    calibration_bins: int = setting(8, "bins of the calibration plots", ge=1, le=100)
    top_errors: int = setting(4, "how many of the worst-predicted positions to draw", ge=0, le=64)

    def check(self) -> list[str]:
        problems = _agent_problems("agents", self.agents) + _agent_problems(
            "calibration_agents", self.calibration_agents
        )
        if problems:
            return problems
        names = {agent_name(a) for a in self.agents}  # what the arena's records are named (net-mcts: net-mcts-100)
        missing = [a for a in self.calibration_agents if agent_name(a) not in names]
        if missing:
            problems.append(f"calibration_agents = {self.calibration_agents}: {missing} are not among the agents")
        games = len(self.evaluation.games())
        if self.replay_game >= games:
            problems.append(f"replay_game = {self.replay_game}: expected < {games}, the games played (-1: the longest)")
        return problems


@dataclass(frozen=True)
class NextRound(Settings):
    """04_next_round: self-play with the best network so far (the newest its gate promoted), the next round's
    training examples."""

    run_dir: str = setting("../runs/notebooks", RUN_DIR_DOC + "; the examples go to {run_dir}/round{round}")
    round: int = setting(1, "this round, from 1: it plays with the best network of the rounds before it", ge=1)
    selfplay: SelfPlayConfig = setting(
        SelfPlayConfig(
            search=SearchConfig(mode="puct", simulations=16),
            network=BEST,
            temperature_moves=8,
        ),
        'the self-play with the best network so far (network "best": the best of the rounds before in run_dir, as '
        "their gates chose; or a checkpoint's path or a shipped network's name)",
    )
    show_examples: int = setting(2, "example positions drawn with their move targets", ge=0, le=64)
    torch_threads: int = setting(1, THREADS_DOC, ge=0, le=1024)

    def selfplay_run(self) -> SelfPlayConfig:
        """The round's self-play: its own games (seed + round: no round replays another's) with the
        network at its absolute path (the run's record names it wherever the notebook ran)."""
        assert self.selfplay.network, "the settings' checks require one for a search with the network"
        network = str(Path(self.selfplay.network).resolve())
        return self.selfplay.replace(seed=self.selfplay.seed + self.round, network=network)

    def check(self) -> list[str]:
        if self.selfplay.search.mode in NO_NETWORK:
            return [f"mode = {self.selfplay.search.mode!r}: a further round searches with the network (puct or gumbel)"]
        return []


@dataclass(frozen=True)
class Baselines(Settings):
    """05_baselines: the DQN and TD learners, then the arena against the other players."""

    run_dir: str = setting("../runs/notebooks", RUN_DIR_DOC + "; this notebook writes {run_dir}/baselines")
    checkpoint: str = setting(
        "",
        "the AlphaZero network (a path or a shipped name) for the net agents ('': those without @PATH left out)",
    )
    dqn: DQNConfig = setting(DQNConfig(steps=3000, filters=16, next_pill="expected"), "the DQN run", prefix=True)
    td: TDConfig = setting(TDConfig(games=12, top_k=4), "the TD run", prefix=True)
    agents: list[str] = setting(["random", "greedy", "mcts-16", "dqn", "td", "net-mcts-32"], "arena players")
    evaluation: EvalConfig = setting(
        EvalConfig(levels=[0, 5, 10], games_per_level=3, top_level_games=3, max_pills=300), "the arena's protocol"
    )
    device: str = setting("cpu", "where the DQN trains and the network runs: auto, cpu or cuda")
    torch_threads: int = setting(1, THREADS_DOC, ge=0, le=1024)

    def dqn_run(self) -> DQNConfig:
        """The DQN run: short runs learn sooner and explore less long; it logs and checkpoints a few
        times whatever the budget, on this notebook's device."""
        steps = self.dqn.steps
        return self.dqn.replace(
            learning_starts=max(64, min(500, steps // 5)),
            eps_decay_steps=max(1, min(5000, steps // 2)),
            log_every=max(8, steps // 20),
            checkpoint_every=max(8, steps // 2),
            device=self.device,
        )

    def td_run(self) -> TDConfig:
        """The TD run, logged and checkpointed a few times whatever its games."""
        return self.td.replace(log_every=max(1, self.td.games // 20), checkpoint_every=max(1, self.td.games // 2))

    def check(self) -> list[str]:
        return _agent_problems("agents", self.agents)


class Notebook(NamedTuple):
    """A notebook of the pipeline: its file stem, its settings, and the settings the pipeline sets."""

    stem: str
    settings: type[Settings]
    pipeline_sets: tuple[str, ...]


# profile section -> notebook, in the order of the pipeline
NOTEBOOKS: dict[str, Notebook] = {
    "round0_data": Notebook("01_round0_data", Round0Data, ("run_dir",)),
    "train": Notebook("02_train", TrainNotebook, ("run_dir", "round", "data", "init", "value_data")),
    "analysis": Notebook("03_analysis", AnalysisNotebook, ("run_dir", "round")),
    "next_round": Notebook("04_next_round", NextRound, ("run_dir", "round", "network")),
    "baselines": Notebook("05_baselines", Baselines, ("run_dir", "checkpoint")),
}
# parameters that are paths: a relative path in a profile is taken from where the pipeline starts
PATH_PARAMETERS = ("checkpoint", "network")


def annotation(tp: Any) -> str:
    """How a parameters cell annotates a setting of type tp, in the words papermill reads (its
    parameter pattern takes no ``|`` and no ``...``): a choice (a Literal) as its values' type,
    ``X | None`` as ``Optional[X]``, a tuple of any length as a list (a list literal fits it)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        return type(args[0]).__name__
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        inner = annotation(rest[0]) if len(rest) == 1 else f"Union[{', '.join(annotation(a) for a in rest)}]"
        return f"Optional[{inner}]" if len(rest) < len(args) else inner
    if origin is tuple and args and args[-1] is Ellipsis:
        return f"list[{annotation(args[0])}]"
    if origin in (list, tuple):
        return f"{origin.__name__}[{', '.join(annotation(a) for a in args)}]"
    return type_text(tp)


def section_of(key: str) -> str:
    """A profile section from its name or its notebook's name ("train" or "02_train")."""
    for section, notebook in NOTEBOOKS.items():
        if key in (section, notebook.stem):
            return section
    raise ValueError(f"unknown profile section {key!r}: use one of {', '.join(NOTEBOOKS)}")


def parameters(section: str) -> dict[str, SettingInfo]:
    """The flat parameters of a section's notebook: name -> `settings.SettingInfo`."""
    return {leaf.name: leaf for leaf in NOTEBOOKS[section].settings.leaves()}


def build(section: str, values: Mapping[str, Any], where: str | None = None, devices: bool = True) -> Settings:
    """The settings of a section's notebook from flat parameter values (the rest: defaults).
    Raises `SettingsError` listing every unknown name and every bad value, by parameter name, and
    with devices, a device this machine lacks or bf16 its CPU would emulate (`_machine_problems`)."""
    known = parameters(section)
    stem = NOTEBOOKS[section].stem
    where = where or stem
    unknown = [name for name in values if name not in known]
    if unknown:
        raise SettingsError(where, [_unknown(name, stem, list(known)) for name in unknown])
    nested = apply_dotted({}, {known[name].path: value for name, value in values.items()}, where)
    try:
        settings = NOTEBOOKS[section].settings.from_dict(nested)
    except SettingsError as e:
        by_path = {leaf.path: name for name, leaf in known.items()}
        raise SettingsError(where, [_flat_name(problem, by_path) for problem in e.problems]) from None
    problems = _machine_problems(known, settings.to_dict()) if devices else []
    if problems:  # what this machine cannot run, or would run emulated, fails now, not minutes into a run
        raise SettingsError(where, problems)
    return settings


# bf16 settings on the CPU and the value each should have there without bf16 instructions
_CPU_BF16 = {"cpu_bf16": (True, "false"), "dtype": ("bfloat16", "float32")}


def _machine_problems(known: Mapping[str, SettingInfo], nested: Mapping[str, Any]) -> list[str]:
    """What a section's settings (nested values) ask of this machine that it lacks: a device, or
    bfloat16 on a CPU that would emulate it (`device.cpu_bf16_problem`)."""

    def value(name: str) -> Any:
        return functools.reduce(lambda d, key: d[key], known[name].path.split("."), nested)

    if "device" not in known:
        return []
    device = str(value("device"))
    problem = device_problem(device)
    if problem:
        return [f"device = {device!r}: {problem}"]
    asked = [name for name, (bf16, _) in _CPU_BF16.items() if name in known and value(name) == bf16]
    slow = cpu_bf16_problem() if asked and resolve_device(device).type == "cpu" else None
    if slow is None:
        return []
    return [f"{name} = {value(name)!r} on the CPU: {slow}; set it to {_CPU_BF16[name][1]}" for name in asked]


def _unknown(name: str, stem: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=3)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    return f"{name}: not a parameter of {stem}{hint} (`python -m drmario settings {stem}` lists them)"


def _flat_name(problem: str, by_path: Mapping[str, str]) -> str:
    """A nested settings problem ("selfplay.search.simulations = -1: ...") by its parameter name."""
    path, sep, rest = problem.partition(" = ")
    return f"{by_path[path]}{sep}{rest}" if sep and path in by_path else problem


def notebook_settings(stem: str, namespace: Mapping[str, Any]) -> Any:
    """In a notebook, after its parameters cell: its settings from the parameters found in
    namespace (``globals()``), every one checked (``SettingsError`` lists each bad one); sets
    torch's CPU threads in the kernel when the notebook has a ``torch_threads`` parameter."""
    section = section_of(stem)
    known = parameters(section)
    settings = build(section, {name: namespace[name] for name in known if name in namespace}, f"{stem} parameters")
    threads = getattr(settings, "torch_threads", 0)
    if threads:  # the kernel's own torch work (the trainer and self-play workers get theirs passed)
        import torch  # lazy: the settings load without torch

        torch.set_num_threads(threads)
    return settings


# Stand-ins for what the pipeline sets, to check a profile before there is a run directory.
PIPELINE_STAND_INS = {
    "run_dir": "runs/profile-check",
    "round": 1,
    "data": ["round0/examples"],
    "value_data": ["value_games/examples"],  # [] when round0_data has no value_games (`section_values`)
    "network": "net.pt",
    "init": None,
}


def notebook_values(stem: str) -> dict[str, Any]:
    """The values the kit's notebook assigns in its parameters cell: what it runs with where a
    profile (or papermill) sets nothing. An assignment that is not a literal is left out."""
    return copy.deepcopy(_notebook_values(stem))


@functools.cache
def _notebook_values(stem: str) -> dict[str, Any]:
    path = kit_dir("notebooks") / f"{stem}.ipynb"
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    values: dict[str, Any] = {}
    for cell in cells:
        if "parameters" not in cell.get("metadata", {}).get("tags", []):
            continue
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        for node in ast.parse(source).body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                name, value = node.target.id, node.value
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                name, value = node.targets[0].id, node.value
            else:
                continue
            try:
                values[name] = ast.literal_eval(value)
            except ValueError:
                continue
    return values


def section_values(profile: Mapping[str, Any], section: str) -> dict[str, Any]:
    """The parameters the pipeline's run of a section's notebook reads, by name: its parameters
    cell's values, replaced by the profile's, with stand-ins for what the pipeline sets
    (`PIPELINE_STAND_INS`); the rest are the settings' defaults, as in the notebook."""
    notebook = NOTEBOOKS[section]
    known = parameters(section)
    given = profile.get(section, {})
    values = {k: v for k, v in notebook_values(notebook.stem).items() if k in known}
    stand_ins = dict(PIPELINE_STAND_INS)
    if section == "train":
        data = {**notebook_values(NOTEBOOKS["round0_data"].stem), **profile.get("round0_data", {})}
        if not data.get("value_games", parameters("round0_data")["value_games"].default):
            stand_ins["value_data"] = []
    values.update({name: stand_ins[name] for name in notebook.pipeline_sets if name in stand_ins})
    return {**values, **given}


def check_profile(profile: Mapping[str, Any], devices: bool | Collection[str] = True) -> None:
    """Every section of a profile must build its notebook's settings (names, types, ranges, and
    with devices what this machine can run: of every section, or of those named), and set nothing
    the pipeline sets itself. Raises `SettingsError` listing every problem."""
    problems = []
    for section, notebook in NOTEBOOKS.items():
        given = profile.get(section, {})
        problems += [
            f"{section}.{name}: set by the pipeline, not by a profile"
            for name in notebook.pipeline_sets
            if name in given
        ]
        here = devices if isinstance(devices, bool) else section in devices
        try:
            build(section, section_values(profile, section), devices=here)
        except SettingsError as e:
            problems += [f"{section}.{p}" for p in e.problems]
    if problems:
        raise SettingsError(f"profile {profile.get('name')!r}", problems)


def check_seeds(profile: Mapping[str, Any], rounds: int) -> None:
    """A run's self-play seeds must differ: round 0's games (round0_data's seed), the value games
    (value_seed, with value_games) and round k's (next_round's seed + k, k from 1 to rounds - 1).
    One seed makes the same games (NES seeds, levels and searches), so a repeat would train on one
    round's games twice, or on the value games no training may use. Raises `SettingsError`."""
    round0, later = (build(s, section_values(profile, s), devices=False) for s in ("round0_data", "next_round"))
    assert isinstance(round0, Round0Data) and isinstance(later, NextRound)
    users: dict[int, list[str]] = {round0.selfplay.seed: ["round 0 (round0_data.seed)"]}
    if round0.value_games:
        users.setdefault(round0.value_seed, []).append("the value games (round0_data.value_seed)")
    for k in range(1, rounds):
        users.setdefault(later.selfplay.seed + k, []).append(f"round {k} (next_round.seed + {k})")
    problems = [
        f"seed {seed} plays the same games for {' and '.join(who)}" for seed, who in users.items() if len(who) > 1
    ]
    if problems:
        raise SettingsError(f"profile {profile.get('name')!r}", problems)


def unread_settings(profile: Mapping[str, Any]) -> list[str]:
    """The settings a checked profile (`check_profile`) sets that its notebooks never read, each with
    why (`Settings.unread`: a search setting beside another ``mode``, a switch's that is off, the
    speed without NES timing). Likely a slip, but not refused: a ``--set`` of another mode leaves the
    profile's settings of the first behind. The pipeline prints them before it runs."""
    notes = []
    for section in NOTEBOOKS:
        settings, known = build(section, section_values(profile, section), devices=False), parameters(section)
        for name, value in profile.get(section, {}).items():
            why = settings.why_unread(known[name].path)
            if why:
                notes.append(f"{section}.{name} = {value!r}: {why}")
    return notes


def load_profile(path: str | Path) -> dict[str, Any]:
    """A profile from YAML (or JSON): ``{"name": ..., section: {parameter: value}}``. A profile may
    start from another (``base: cpu``, a kit profile's name or a path beside it) and set only what
    differs: its parameters replace the base's one by one."""
    return _load_profile(path, ())


def _load_profile(path: str | Path, seen: tuple[Path, ...]) -> dict[str, Any]:
    import yaml

    path = profile_path(path)
    if path.resolve() in seen:
        chain = " -> ".join(str(p) for p in (*seen, path.resolve()))
        raise ValueError(f"profile {path}: its bases form a loop ({chain})")
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:  # a binary file is not UTF-8 text
        raise ValueError(f"profile {path}: cannot read it as YAML text: {e}") from e
    if not isinstance(data, dict):
        raise ValueError(f"profile {path}: expected a mapping of a name and sections, got {type(data).__name__}")
    profile: dict[str, Any] = {"name": data.pop("name", path.stem)}
    if "base" in data:
        base = data.pop("base")
        if not isinstance(base, str):
            raise ValueError(f"profile {path}: base must name a profile, got {base!r}")
        if Path(base).suffix and not Path(base).is_absolute():
            base = str(path.parent / base)  # a base file beside this one
        try:
            inherited = _load_profile(base, (*seen, path.resolve()))
        except FileNotFoundError as e:
            raise ValueError(f"profile {path}: base {base!r}: {e}") from e
        profile.update({k: v for k, v in inherited.items() if k != "name"})
    for key, values in data.items():
        if not isinstance(values, dict):
            raise ValueError(f"profile {path}: section {key!r} must be a mapping of parameters")
        try:
            section = section_of(key)
        except ValueError as e:
            raise ValueError(f"profile {path}: {e}") from None
        profile[section] = {**profile.get(section, {}), **values}
    return profile


def apply_overrides(profile: Mapping[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """A copy of profile with ``section.parameter=value`` overrides applied (`settings.read_value`:
    values are YAML, text settings' as typed), or ``name=value``."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in profile.items()}
    for text in overrides:
        key, raw = split_assignment(text)
        if key == "name":
            out["name"] = read_value(raw, str, text)
            continue
        section, dot, parameter = key.partition(".")
        if not dot or not parameter:
            raise ValueError(f"override {text!r}: expected SECTION.PARAMETER=VALUE, e.g. train.steps=500")
        leaf = parameters(section_of(section)).get(parameter)
        out.setdefault(section_of(section), {})[parameter] = read_value(raw, leaf and leaf.type, text)
    return out
