"""Command line: ``python -m drmario <command>`` (or ``drmario <command>`` once installed).

The commands that run a component take its settings as flags derived from its settings class
(``--simulations 400``: every leaf setting, with its doc and default in ``--help``), from a YAML or
JSON file (``--config``) and as ``--set KEY=VALUE`` (a flag name or a dotted path); later ones win.
``python -m drmario settings NAME`` lists the settings of a component or a notebook.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from drmario.files import RunError
from drmario.settings import (
    TEXT_TYPES,
    SettingInfo,
    Settings,
    SettingsError,
    apply_dotted,
    load_yaml,
    read_value,
    split_assignment,
    text_value,
)

SETTING = "setting:"  # argparse dest prefix of the derived flags


# ------------------------------------------------------------------------------------------------
# Settings as flags


def _yaml_value(text: str) -> Any:
    if text == "None":  # the flags' help writes int|None: take Python's spelling of YAML's null too
        return None
    return read_value(text)


def _is_sequence(tp: Any) -> bool:
    """list[...] or tuple[...], also as X | None."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return any(_is_sequence(arg) for arg in typing.get_args(tp) if arg is not type(None))
    return typing.get_origin(tp) in (list, tuple)


def _flag_type(leaf: SettingInfo) -> Callable[[str], Any]:
    if leaf.type in TEXT_TYPES:
        return text_value
    return _yaml_list if _is_sequence(leaf.type) else _yaml_value


def _yaml_list(text: str) -> Any:
    """A list flag's value: YAML ([0, 10]), or the same without its brackets (0,10)."""
    if text == "None" or text.lstrip().startswith("["):
        return _yaml_value(text)
    return _yaml_value(f"[{text}]")


def add_settings(parser: argparse.ArgumentParser, cls: type[Settings], skip: tuple[str, ...] = ()) -> None:
    """A flag for every leaf setting of cls (values are YAML: 500, 0.1, true, [0, 4], null; a list
    also without its brackets, 0,4; a true-or-false flag alone means true; text settings such as paths
    as typed), plus --config FILE and --set KEY=VALUE."""
    group = parser.add_argument_group(f"settings ({cls.__name__})")
    group.add_argument("--config", metavar="FILE", help="settings from a YAML or JSON file (nested, as saved)")
    group.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a setting by flag name or dotted path"
    )
    for leaf in cls.leaves():
        if leaf.name in skip:
            continue
        switch = leaf.type is bool
        flag = "--" + leaf.name.replace("_", "-")
        try:
            group.add_argument(
                flag,
                dest=SETTING + leaf.path,
                type=_flag_type(leaf),
                nargs="?" if switch else None,
                const=True if switch else None,
                default=argparse.SUPPRESS,
                metavar=leaf.type_text.replace(" ", ""),
                help=f"{leaf.doc} (default: {leaf.default!r})".replace("%", "%%"),
            )
        except argparse.ArgumentError as e:  # argparse's message would not name the setting
            clash = f"{cls.__name__}.{leaf.path}: its flag {flag} is already an option of {parser.prog!r}"
            raise TypeError(clash) from e


def settings_from(cls: type[Settings], args: argparse.Namespace, **fixed: Any) -> Any:
    """The settings of cls from --config, the derived flags, --set and fixed (dotted paths), in
    that order; SettingsError names every bad one. A flag or --set that the settings never read
    (`Settings.unread`: another search mode's, the speed without NES timing) is named on stderr."""
    import yaml

    base: dict = {}
    if getattr(args, "config", None):
        try:
            base = load_yaml(Path(args.config).read_text(encoding="utf-8")) or {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:  # a binary file is not UTF-8 text
            raise ValueError(f"--config {args.config}: cannot read it as YAML text: {e}") from e
    by_name = {leaf.name: leaf for leaf in cls.leaves()}
    by_path = {leaf.path: leaf for leaf in by_name.values()}
    overrides = {k[len(SETTING) :]: v for k, v in vars(args).items() if k.startswith(SETTING)}
    for text in getattr(args, "set", None) or []:
        key, raw = split_assignment(text)
        leaf = by_name.get(key) or by_path.get(key)
        if leaf is None:
            import difflib

            tails = [p for p in by_path if key.endswith("." + p)]  # a notebook's path, e.g. evaluation.seed
            close = tails or difflib.get_close_matches(key, list(dict.fromkeys([*by_name, *by_path])), n=2)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise SettingsError(cls.__name__, [f"--set {key}: not a setting{hint}"])
        overrides[leaf.path] = read_value(raw, leaf.type, text)  # text settings as typed, as their flags
    settings = cls.from_dict(apply_dotted(base, {**overrides, **fixed}, cls.__name__))
    for path, value in overrides.items():  # a flag the settings never read is likely a slip: say so, run anyway
        why = settings.why_unread(path)
        if why:
            print(f"unread setting, {by_path[path].name} = {value!r}: {why}", file=sys.stderr)
    return settings


def at_least(minimum: float, kind: type = int) -> Callable[[str], Any]:
    """An argparse type: a number of `kind` no smaller than minimum (argparse names the option)."""

    def parse(text: str) -> Any:
        value = kind(text)  # a ValueError here: argparse says "invalid int value"
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text}: expected {minimum} or more")
        return value

    parse.__name__ = kind.__name__
    return parse


def check_device(device: str) -> None:
    """ValueError, before anything loads, when a network cannot run on --device here."""
    from drmario.learn.device import device_problem

    problem = device_problem(device)
    if problem:
        raise ValueError(f"--device {device}: {problem}")


def set_threads(threads: int) -> None:
    """torch's CPU threads in this process (0: torch's default, one per core). The kit's small
    networks run fastest on one: with more, each tiny matrix product waits on its threads."""
    if threads:
        import torch  # lazy: only the commands that run a network pay for it

        torch.set_num_threads(threads)


def check_agents(specs: list[str]) -> None:
    """Every agent spec parses (ValueError naming a misspelt one), before anything loads."""
    from drmario.run.agents import parse_spec

    for spec in specs:
        parse_spec(spec)


def _needs_torch(specs: list[str]) -> bool:
    from drmario.run.agents import TORCH_KINDS, parse_spec

    return any(parse_spec(spec)[0] in TORCH_KINDS for spec in specs)


# ------------------------------------------------------------------------------------------------
# Commands


def cmd_play(args: argparse.Namespace) -> int:
    """Play one game with any agent and show it move by move in the terminal. Under --timing nes
    the game keeps only the moves a player reaches in time at the --speed setting's real speed and
    counts its frames; with -v each pill then shows its input path: the frames from its first frame
    to its lock, the speed index and the frame parity it fell with, and the buttons held on each
    frame (LRDAB, · for none; X×n: n frames alike, (X Y)×n: a pair of frames n times). The game's
    frame count comes at the end."""
    from drmario.engine.game import Game
    from drmario.engine.nes_timing import Speed
    from drmario.engine.rules import canonical
    from drmario.engine.timing import NES_FPS, input_path
    from drmario.play.arena import SPEED_WITHOUT_TIMING
    from drmario.play.lockstep import decision_seed
    from drmario.run.agents import make_agent, network_name
    from drmario.search.core import Position

    check_agents([args.agent])
    if _needs_torch([args.agent]):
        check_device(args.device)
        set_threads(args.threads)
    agent = make_agent(args.agent, network=args.network, device=args.device, dtype=args.dtype)
    agent.name = network_name(args.agent, args.network)
    if args.speed and args.timing == "free":
        print(f"unread setting, speed = {args.speed!r}: {SPEED_WITHOUT_TIMING}", file=sys.stderr)
    speed_setting: Speed = args.speed or "med"
    game = Game(
        args.seed,
        args.level,
        pill_mode=args.pills,
        stall_limit=args.stall_limit,
        timing=args.timing,
        speed=speed_setting,
    )
    timing = f", timing nes at speed {speed_setting}" if game.timed else ""
    print(
        f"{agent.name} plays seed {args.seed}, level {args.level}: {game.viruses_left} viruses, {args.pills} pills"
        f"{timing}"
    )
    print(f"{game.board}\n")
    while not game.over and game.pills_used < args.max_pills:
        pill, preview = game.pill, game.next_pill
        speed, parity = game.speed_index, game.parity
        [decision] = agent.choose([Position.of(game)], [decision_seed(args.rng_seed, 0, game.pills_used)])
        reach = game.reachable()[canonical(pill, decision.move)] if game.timed and args.verbose else None
        result = game.play(decision.move)
        if args.verbose or result.viruses_cleared or game.over:
            r, x, y = decision.move
            print(
                f"pill {game.pills_used:4d}: {pill} (next {preview}) -> r={r} x={x} y={y}: "
                f"{result.viruses_cleared} cleared, {game.viruses_left} left"
            )
            if reach is not None:
                print(f"  {reach.frames} frames (speed {speed}, parity {parity}): {input_path(reach.inputs)}")
            if args.verbose:
                print(f"{game.board}\n")
                time.sleep(args.delay)
    outcome = game.outcome.value if game.outcome else f"stopped at the pill cap ({args.max_pills})"
    print(f"\n{game.board}\n\n{outcome} after {game.pills_used} pills, {game.viruses_cleared} viruses cleared")
    if game.timed:
        print(
            f"{game.frames} frames ({game.frames / NES_FPS:.1f} s at {NES_FPS} frames/s), from the first pill's frame 1"
        )
    if args.record:
        print(game.record(agent=agent.name, rng_seed=args.rng_seed).to_json())
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    """Self-play games with search, written as training examples into a run directory."""
    from drmario.play.selfplay import SelfPlayConfig, generate
    from drmario.run.agents import resolve_checkpoint

    cfg = settings_from(SelfPlayConfig, args)
    if cfg.network:  # a shipped network's name, as agent specs take
        cfg = cfg.replace(network=str(resolve_checkpoint(cfg.network)))
    if cfg.network and cfg.workers == 1:  # one process plays with the network (more: one thread each)
        set_threads(args.threads)
    print(generate(cfg, args.run_dir, progress=not args.no_progress).to_string())
    return 0


def _print_arena(table: Any) -> None:
    from drmario.run.compare import format_leaderboard, leaderboard

    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print("\n" + format_leaderboard(leaderboard(table)))


def evaluation_record(
    specs: list[str], network: str | None, cfg: Any, dtype: str = "auto", device: str | None = None
) -> dict[str, Any]:
    """What an arena table is made with: the agents, each network file by its digest (a retrained
    checkpoint at the same path is another agent), the networks' play dtype and device type (auto's
    dtype is bfloat16 on CUDA, float32 on the CPU) and the evaluation settings."""
    from drmario.files import file_sha256
    from drmario.run.agents import TORCH_KINDS, parse_spec, resolve_checkpoint

    digests = {}
    for spec in specs:
        kind, _, path = parse_spec(spec)
        source = path or network
        if kind in TORCH_KINDS and source is not None:
            file = resolve_checkpoint(source)
            digests[spec] = file_sha256(file) if file.is_file() else None
    record = {"agents": specs, "network": network, "digests": digests, "dtype": dtype, "evaluation": cfg.to_dict()}
    if digests and device is not None:
        from drmario.learn.device import resolve_device

        record["device"] = resolve_device(device).type
    return record


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Agents play the same fixed evaluation games (NES rules, a pill cap that counts as a failure);
    prints the arena table with Wilson 95% intervals. With --out FILE it writes the table there
    (and FILE.settings.json, what it was made with), and a later run with the same agents, networks
    and settings prints FILE instead of playing again (--force: play again)."""
    import json

    import pandas as pd

    from drmario.files import write_atomic
    from drmario.play.arena import EvalConfig, arena
    from drmario.run.agents import make_agents, network_name

    specs = [s.strip() for s in args.agents.split(",")]
    check_agents(specs)
    cfg = settings_from(EvalConfig, args)
    if _needs_torch(specs):
        check_device(args.device)
    record = evaluation_record(specs, args.network, cfg, args.dtype, args.device)
    sidecar = Path(f"{args.out}.settings.json") if args.out else None
    if args.out:  # before the games, not after them
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    if sidecar and Path(args.out).is_file() and sidecar.is_file() and not args.force:
        try:
            same = json.loads(sidecar.read_text()) == json.loads(json.dumps(record))
        except ValueError:  # a damaged record: play again
            same = False
        if same:
            print(f"{args.out}: played before with the same agents and settings (--force plays again)\n")
            _print_arena(pd.read_csv(args.out))
            return 0
        print(f"{args.out} was made with other agents or settings: playing again", file=sys.stderr)
    if _needs_torch(specs):
        set_threads(args.threads)
    agents = make_agents(specs, network=args.network, device=args.device, dtype=args.dtype)
    for spec, agent in zip(specs, agents):  # policy@small, not policy: networks stay apart in tables
        agent.name = network_name(spec, args.network)
    table, _ = arena(agents, config=cfg, progress=not args.no_progress)
    _print_arena(table)
    if args.out and sidecar:
        sidecar.unlink(missing_ok=True)  # the old record must not vouch for the new table, were this cut short
        write_atomic(args.out, table.to_csv(index=False))
        write_atomic(sidecar, json.dumps(record, indent=1) + "\n")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    """Train (or continue training) a network on example files in a run directory. Exit status 3
    when training stopped early (e.g. a non-finite loss), 2 for bad settings or data."""
    import json

    from drmario.files import write_atomic
    from drmario.learn.train import TrainConfig, train
    from drmario.run.agents import resolve_checkpoint
    from drmario.run.notebook import result_to_json

    set_threads(args.threads)
    fixed: dict[str, Any] = {"data": args.data} if args.data else {}
    if args.no_progress:
        fixed["progress"] = False
    cfg = settings_from(TrainConfig, args, **fixed)
    check_device(cfg.device)
    if cfg.init:  # a shipped network's name, as agent specs take
        cfg = cfg.replace(init=str(resolve_checkpoint(cfg.init)))
    try:
        result = train(cfg, args.run_dir)
    except FileNotFoundError as e:
        print(f"drmario train: error: {e}", file=sys.stderr)
        return 2
    write_atomic(Path(args.run_dir) / "train_result.json", json.dumps(result_to_json(result), indent=1) + "\n")
    print(f"step {result.step}: train {result.train}, test {result.test}; checkpoint {result.checkpoint}")
    if result.stopped:
        print(f"drmario train: stopped early: {result.stopped}", file=sys.stderr)
        return 3
    return 0


def cmd_pipeline(args: argparse.Namespace) -> int:
    """Run the notebooks with papermill into a run directory: 01 round-0 data -> 02 training ->
    03 analysis, then 04 self-play with the best network so far -> 02 -> 03 for each further round.
    Resumes an interrupted run; refuses a run directory made with other settings."""
    from drmario.run.pipeline import PipelineError, run_pipeline, step_done

    try:
        steps = run_pipeline(
            args.profile,
            args.run_dir,
            rounds=args.rounds,
            baselines=args.baselines,
            overrides=args.set or [],
            stop_before=args.stop_before,
            progress=not args.no_progress,
        )
    except PipelineError as e:
        print(f"drmario pipeline: error: {e}", file=sys.stderr)
        return 1
    run_dir = steps[0].output.parent.parent
    finished = step_done(steps[-1])  # the steps run in order, and one that fails raises
    print(f"{'done' if finished else 'stopped'}: {run_dir} (executed notebooks in {run_dir / 'notebooks'})")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """Compare run directories: a leaderboard of every round's network (alone and with search) and
    the agents without a network, best first, with the win rate per level and over all levels
    (wins/games, Wilson 95% interval); the settings in which the runs differ; the final train and
    test losses of every training run; and, with --out, the plots as PNG files (leaderboard.png,
    arena.png, curves.png)."""
    from drmario.run.compare import (
        arena_results,
        final_losses,
        format_leaderboard,
        leaderboard,
        save_figures,
        settings_differences,
        training_curves,
    )

    results = arena_results(args.run_dirs)
    curves = training_curves(args.run_dirs)
    if results.empty and curves.empty:
        raise ValueError(
            f"no arena tables (analysis*/arena.csv) or training metrics (train*/metrics.csv) in {args.run_dirs}"
        )
    if len(args.run_dirs) > 1:
        differ = settings_differences(args.run_dirs)
        if differ.empty:
            print("The runs were made with the same settings (pipeline.json, train*/config.json)\n")
        else:
            print("Settings that differ between the runs (pipeline.json, else train*/config.json)")
            print(differ.to_string() + "\n")
    print("Leaderboard (win rate: every virus cleared; NES rules, the pill cap counts as a failure)")
    print(format_leaderboard(leaderboard(results)))
    losses = final_losses(curves)
    if not losses.empty:
        print("\nFinal losses of each training run (its last train row and last test row)")
        print(losses.to_string(float_format=lambda v: f"{v:.4g}"))
    if args.out:
        for path in save_figures(args.run_dirs, args.out):
            print(f"wrote {path}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Export a run's network with its card (settings, data, steps, arena results, the run's
    rounds): unless --round is given, the newest round its gate promoted (in a run without gates,
    the analysed round that won most: `export.shipped_round`)."""
    from drmario.run.export import card_path, export_network

    out = export_network(args.run_dir, args.out, args.round)
    print(f"wrote {out} and {card_path(out)}")
    return 0


# The components' settings classes by the module that defines them: `settings SearchConfig` imports
# that module alone (those of the engine, the search and the arena load without torch).
COMPONENTS = {
    "SearchConfig": "drmario.search.config",
    "SelfPlayConfig": "drmario.play.selfplay",
    "NetConfig": "drmario.learn.net",
    "TrainConfig": "drmario.learn.train",
    "EvalConfig": "drmario.play.arena",
    "GateConfig": "drmario.play.gate",
    "DQNConfig": "drmario.baselines",
    "TDConfig": "drmario.baselines",
}


def settings_class(name: str) -> tuple[type[Settings], str | None]:
    """The settings class called name (a component, a notebook or its profile section) and, for a
    notebook, its stem; KeyError for an unknown name."""
    if name in COMPONENTS:
        return getattr(importlib.import_module(COMPONENTS[name]), name), None
    from drmario.run.profiles import NOTEBOOKS

    for section, notebook in NOTEBOOKS.items():
        if name in (section, notebook.stem, notebook.stem.split("_")[0]):  # 02 is 02_train, as in --stop-before
            return notebook.settings, notebook.stem
    raise KeyError(name)


def settings_classes() -> dict[str, type[Settings]]:
    """Every settings class by name: the components' and the notebooks' (by notebook stem)."""
    from drmario.run.profiles import NOTEBOOKS

    out: dict[str, type[Settings]] = {name: settings_class(name)[0] for name in COMPONENTS}
    out.update({nb.stem: nb.settings for nb in NOTEBOOKS.values()})
    out.update({section: nb.settings for section, nb in NOTEBOOKS.items()})
    return out


def cmd_settings(args: argparse.Namespace) -> int:
    """List the settings of a component (SearchConfig, TrainConfig, ...) or a notebook (02_train,
    or its profile section, train): flat name, dotted path, type, value and doc. A notebook's values
    are those its parameters cell sets (what it runs with), with the class default beside any that
    differs."""
    try:
        cls, stem = settings_class(args.name)
    except KeyError:
        import difflib

        names = list(dict.fromkeys([*COMPONENTS, *settings_classes()]))
        close = difflib.get_close_matches(args.name, names, n=2)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        print(
            f"drmario settings: unknown name {args.name!r}{hint}; one of: {', '.join(names)}",
            file=sys.stderr,
        )
        return 2
    values: dict[str, Any] = {}
    if stem:  # (a component's settings load without torch; a notebook's import its module)
        from drmario.run.profiles import notebook_values

        values = notebook_values(stem)
        print(f"{stem}: the values of its parameters cell (a profile or --set overrides them)\n")
    for leaf in cls.leaves():
        path = f" ({leaf.path})" if leaf.path != leaf.name else ""
        value = values.get(leaf.name, leaf.default)
        default = f" (class default: {leaf.default!r})" if value != leaf.default else ""
        print(f"{leaf.name}{path}: {leaf.type_text} = {value!r}{default}\n    {leaf.doc}")
    return 0


# ------------------------------------------------------------------------------------------------
# Parser


THREADS_HELP = "CPU threads for torch (0: torch's default, one per core); 1 is fastest for the kit's small networks"


def _play_args(p: argparse.ArgumentParser) -> None:
    from drmario.run.agents import AGENT_HELP, DTYPE_HELP, DTYPES

    p.add_argument("--agent", default="greedy", help=f"who plays: {AGENT_HELP}")
    p.add_argument("--network", help="checkpoint for the network agents (or give it as SPEC@PATH)")
    p.add_argument("--device", default="cpu", help="where a network runs")
    p.add_argument("--dtype", choices=DTYPES, default="auto", help=DTYPE_HELP)
    p.add_argument("--threads", type=at_least(0), default=1, help=THREADS_HELP)
    p.add_argument("--seed", type=int, default=1234, help="NES RNG seed, 2..65535")
    p.add_argument("--level", type=int, default=0, help="virus level 0..24")
    p.add_argument("--pills", choices=["nes", "iid"], default="nes", help="pill sequence: the NES list or i.i.d.")
    p.add_argument(
        "--timing",
        choices=["free", "nes"],
        default="free",
        help="free: a pill goes wherever the controls reach at slow speed (time to spare); nes: only where a player "
        "reaches it in time at --speed's real speed, and the game counts its frames (RULES.md)",
    )
    p.add_argument("--speed", choices=["low", "med", "hi"], help="the NES speed setting (timing nes; default: med)")
    p.add_argument("--stall-limit", type=int, default=None, help="stalemate after this many idle pills (none)")
    p.add_argument("--max-pills", type=at_least(1), default=2000, help="stop the game after this many pills")
    p.add_argument("--rng-seed", type=at_least(0), default=0, help="seeds the agent's decisions")
    p.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="print the board after every move; with --timing nes also each pill's input path (see above)",
    )
    p.add_argument("--delay", type=at_least(0.0, float), default=0.0, help="seconds to wait after each board (with -v)")
    p.add_argument("--record", action="store_true", help="print the game record as JSON at the end")


def _generate_args(p: argparse.ArgumentParser) -> None:
    from drmario.play.selfplay import SelfPlayConfig

    p.add_argument("run_dir", help="run directory (resumes if it holds this run already)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--threads", type=at_least(0), default=1, help=THREADS_HELP + " (with workers > 1: one per worker)")
    add_settings(p, SelfPlayConfig)


def _evaluate_args(p: argparse.ArgumentParser) -> None:
    from drmario.play.arena import EvalConfig
    from drmario.run.agents import AGENT_HELP, DTYPE_HELP, DTYPES

    p.add_argument("--agents", default="random,greedy,mcts-100", help=f"comma-separated agents: {AGENT_HELP}")
    p.add_argument("--network", help="checkpoint for the network agents (or give it as SPEC@PATH)")
    p.add_argument("--device", default="cpu", help="where networks run")
    p.add_argument("--dtype", choices=DTYPES, default="auto", help=DTYPE_HELP)
    p.add_argument("--threads", type=at_least(0), default=1, help=THREADS_HELP)
    p.add_argument("--out", metavar="FILE", help="write the table as CSV; if FILE was made the same way, print it")
    p.add_argument("--force", action="store_true", help="play again even if --out FILE was made the same way")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_settings(p, EvalConfig)


def _train_args(p: argparse.ArgumentParser) -> None:
    from drmario.learn.train import TrainConfig

    p.add_argument("run_dir", help="run directory (continues the run there, if any)")
    p.add_argument("data", nargs="*", help="example files or folders (replace the settings' data)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--threads", type=at_least(0), default=1, help=THREADS_HELP)
    add_settings(p, TrainConfig, skip=("data", "progress"))


def _pipeline_args(p: argparse.ArgumentParser) -> None:
    from drmario.run.kit import kit_profiles

    kits = ", ".join(kit_profiles())
    p.add_argument("--profile", default="ci", help=f"a profile file, or one of the kit's: {kits}")
    p.add_argument("--run-dir", help="run directory (default runs/<profile name>)")
    p.add_argument(
        "--rounds", type=int, default=1, help="training rounds: 1 is 01 -> 02 -> 03; each more adds 04 -> 02 -> 03"
    )
    p.add_argument(
        "--set", action="append", metavar="SECTION.PARAM=VALUE", help="override a profile value, e.g. train.steps=500"
    )
    p.add_argument("--baselines", action="store_true", help="finish with 05: the DQN and TD baselines")
    p.add_argument(
        "--stop-before",
        metavar="NOTEBOOK",
        help="stop at the first step of this notebook still to run (its number, name or section, e.g. 02 or train: "
        "make round 0's games here and train where the GPU is, resuming the run there)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def _compare_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories (of the pipeline) to compare")
    p.add_argument("--out", metavar="FOLDER", help="save the plots there as PNG files")


def _export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="run directory (of the pipeline)")
    p.add_argument("--out", required=True, help="the network file to write (.pt); its card goes beside it (.json)")
    p.add_argument("--round", type=int, help="whose network: the one trained after this round (default: the best)")


def _settings_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="SearchConfig, SelfPlayConfig, NetConfig, TrainConfig, EvalConfig, ... or a notebook")


# name -> (function, a one-sentence summary for the command list, its arguments)
COMMANDS: dict[str, tuple[Callable[[argparse.Namespace], int], str, Callable[[argparse.ArgumentParser], None]]] = {
    "play": (cmd_play, "Play one game with any agent, shown move by move.", _play_args),
    "generate": (cmd_generate, "Self-play games written as training examples.", _generate_args),
    "evaluate": (cmd_evaluate, "Agents play the same fixed games; prints their win rates.", _evaluate_args),
    "train": (cmd_train, "Train a network on example files.", _train_args),
    "pipeline": (cmd_pipeline, "Run the notebooks (data, training, analysis) into a run directory.", _pipeline_args),
    "compare": (cmd_compare, "Compare run directories: leaderboard, settings, losses, plots.", _compare_args),
    "export": (cmd_export, "Export a run's best network with its card.", _export_args),
    "settings": (cmd_settings, "List the settings of a component or a notebook.", _settings_args),
}
RESUMABLE = ("generate", "train", "pipeline")  # a rerun of these continues where they stopped


class _Formatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, except where there is none to show (None, or a flag's False)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.nargs == 0:
            return action.help
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """The top-level parser, with each command's own (`commands`), which reports what it does not
    know under that command's usage, with the closest option."""

    commands: dict[str, argparse.ArgumentParser]

    def parse_command(self, argv: list[str]) -> argparse.Namespace:
        args, extra = self.parse_known_args(argv)
        if extra:
            import difflib

            command = self.commands[args.command]
            options = [s for action in command._actions for s in action.option_strings]  # argparse has no public list
            close = difflib.get_close_matches(extra[0].split("=")[0], options, n=1)
            hint = f"; did you mean {close[0]}?" if close and extra[0].startswith("-") else ""
            command.error(f"unrecognized arguments: {' '.join(extra)}{hint}")
        return args


def build_parser(only: str | None = None) -> Parser:
    """The parser of every command; with only, just that command gets its arguments (the others
    would import their settings classes, torch among them, for nothing)."""
    parser = Parser(prog="drmario", description="drmario-kit: Dr. Mario, AlphaZero-style")
    parser.commands = {}
    sub = parser.add_subparsers(dest="command", required=True, parser_class=argparse.ArgumentParser)
    for name, (func, summary, add_args) in COMMANDS.items():
        p = sub.add_parser(name, help=summary, description=func.__doc__, formatter_class=_Formatter)
        p.set_defaults(func=func)
        parser.commands[name] = p
        if only is None or only == name:
            add_args(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in argv if not a.startswith("-")), "")  # no options come before the command
    try:
        args = build_parser(only=command).parse_command(argv)
        try:
            status = args.func(args)
            sys.stdout.flush()  # output into a closed pipe fails here, not after main
            return status
        except (ValueError, FileNotFoundError, PermissionError, RunError) as e:  # RunError: a busy run directory, ...
            print(f"drmario {args.command}: error: {e}", file=sys.stderr)
            return 2
    except BrokenPipeError:  # the output piped into head or less, which stopped reading
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 141
    except KeyboardInterrupt:  # Ctrl-C: one line, not the traceback of wherever it landed
        resume = "; run the same command again to resume" if command in RESUMABLE else ""
        print(f"\ndrmario {command}: interrupted{resume}".rstrip(), file=sys.stderr)
        # what the interrupt cut short (numba compiling: llvmlite's half-built objects) can fail in its
        # finalizers as the interpreter exits; their "Exception ignored" tracebacks say nothing to the user
        sys.unraisablehook = lambda unraisable: None
        return 130


if __name__ == "__main__":
    sys.exit(main())
