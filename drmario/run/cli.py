"""Command line: ``python -m drmario <command>`` (or ``drmario <command>`` once installed).

The commands that run a component take its settings as flags derived from its settings class
(``--simulations 400``: every leaf setting, with its doc and default in ``--help``), from a YAML or
JSON file (``--config``) and as ``--set KEY=VALUE`` (a flag name or a dotted path); later ones win.
``python -m drmario settings NAME`` lists the settings of a component or a notebook.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from drmario.files import RunError
from drmario.settings import Settings, SettingsError, apply_dotted, load_yaml, parse_assignment

SETTING = "setting:"  # argparse dest prefix of the derived flags


# ------------------------------------------------------------------------------------------------
# Settings as flags


def _yaml_value(text: str) -> Any:
    return parse_assignment(f"v={text}")[1]


def add_settings(parser: argparse.ArgumentParser, cls: type[Settings], skip: tuple[str, ...] = ()) -> None:
    """A flag for every leaf setting of cls (values are YAML: 500, 0.1, true, [0, 4], null), plus
    --config FILE and --set KEY=VALUE."""
    group = parser.add_argument_group(f"settings ({cls.__name__})")
    group.add_argument("--config", metavar="FILE", help="settings from a YAML or JSON file (nested, as saved)")
    group.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a setting by flag name or dotted path"
    )
    for leaf in cls.leaves():
        if leaf.name in skip:
            continue
        group.add_argument(
            "--" + leaf.name.replace("_", "-"),
            dest=SETTING + leaf.path,
            type=_yaml_value,
            default=argparse.SUPPRESS,
            metavar=leaf.type_text.replace(" ", ""),
            help=f"{leaf.doc} (default: {leaf.default!r})".replace("%", "%%"),
        )


def settings_from(cls: type[Settings], args: argparse.Namespace, **fixed: Any) -> Any:
    """The settings of cls from --config, the derived flags, --set and fixed (dotted paths), in
    that order; SettingsError names every bad one."""
    import yaml

    base: dict = {}
    if getattr(args, "config", None):
        try:
            base = load_yaml(Path(args.config).read_text(encoding="utf-8")) or {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:  # a binary file is not UTF-8 text
            raise ValueError(f"--config {args.config}: cannot read it as YAML text: {e}") from e
    paths = {leaf.name: leaf.path for leaf in cls.leaves()}
    overrides = {k[len(SETTING) :]: v for k, v in vars(args).items() if k.startswith(SETTING)}
    for text in getattr(args, "set", None) or []:
        key, value = parse_assignment(text)
        if key not in paths and key not in paths.values():
            import difflib

            close = difflib.get_close_matches(key, [*paths, *paths.values()], n=2)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise SettingsError(cls.__name__, [f"--set {key}: not a setting{hint}"])
        overrides[paths.get(key, key)] = value
    return cls.from_dict(apply_dotted(base, {**overrides, **fixed}, cls.__name__))


# ------------------------------------------------------------------------------------------------
# Commands


def cmd_play(args: argparse.Namespace) -> int:
    """Play one game with any agent and show it move by move in the terminal."""
    from drmario.engine.game import Game
    from drmario.play.lockstep import decision_seed
    from drmario.run.agents import make_agent
    from drmario.search.core import Position

    agent = make_agent(args.agent, network=args.network, device=args.device)
    game = Game(args.seed, args.level, pill_mode=args.pills, stall_limit=args.stall_limit)
    print(f"{agent.name} plays seed {args.seed}, level {args.level}: {game.viruses_left} viruses, {args.pills} pills")
    print(f"{game.board}\n")
    while not game.over and game.pills_used < args.max_pills:
        pill, preview = game.pill, game.next_pill
        [decision] = agent.choose([Position.of(game)], [decision_seed(args.rng_seed, 0, game.pills_used)])
        result = game.play(decision.move)
        if args.verbose or result.viruses_cleared or game.over:
            r, x, y = decision.move
            print(
                f"pill {game.pills_used:4d}: {pill} (next {preview}) -> r={r} x={x} y={y}: "
                f"{result.viruses_cleared} cleared, {game.viruses_left} left"
            )
            if args.verbose:
                print(f"{game.board}\n")
                time.sleep(args.delay)
    outcome = game.outcome.value if game.outcome else f"stopped at the pill cap ({args.max_pills})"
    print(f"\n{game.board}\n\n{outcome} after {game.pills_used} pills, {game.viruses_cleared} viruses cleared")
    if args.record:
        print(game.record(agent=agent.name, rng_seed=args.rng_seed).to_json())
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    """Self-play games with search, written as training examples into a run directory."""
    from drmario.play.selfplay import SelfPlayConfig, generate

    cfg = settings_from(SelfPlayConfig, args)
    print(generate(cfg, args.run_dir, progress=not args.no_progress).to_string())
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Agents play the same fixed evaluation games (NES rules, a pill cap that counts as a failure);
    prints the arena table with Wilson 95% intervals, and writes it with --out."""
    from drmario.files import write_atomic
    from drmario.play.arena import EvalConfig, arena
    from drmario.run.agents import make_agents
    from drmario.run.compare import format_leaderboard, leaderboard

    cfg = settings_from(EvalConfig, args)
    agents = make_agents(args.agents.split(","), network=args.network, device=args.device)
    table, _ = arena(agents, config=cfg, progress=not args.no_progress)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print("\n" + format_leaderboard(leaderboard(table)))
    if args.out:
        write_atomic(args.out, table.to_csv(index=False))
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    """Train (or continue training) a network on example files in a run directory. Exit status 3
    when training stopped early (e.g. a non-finite loss), 2 for bad settings or data."""
    import json

    from drmario.files import write_atomic
    from drmario.learn.train import TrainConfig, train
    from drmario.run.notebook import result_to_json

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    fixed: dict[str, Any] = {"data": args.data} if args.data else {}
    if args.no_progress:
        fixed["progress"] = False
    cfg = settings_from(TrainConfig, args, **fixed)
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
    03 analysis, then 04 self-play with the newest network -> 02 -> 03 for each further round.
    Resumes an interrupted run; refuses a run directory made with other settings."""
    from drmario.run.pipeline import PipelineError, run_pipeline

    try:
        steps = run_pipeline(
            args.profile,
            args.run_dir,
            rounds=args.rounds,
            baselines=args.baselines,
            overrides=args.set or [],
            progress=not args.no_progress,
        )
    except PipelineError as e:
        print(f"drmario pipeline: error: {e}", file=sys.stderr)
        return 1
    run_dir = steps[0].output.parent.parent
    print(f"done: {run_dir} (executed notebooks in {run_dir / 'notebooks'})")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """Compare run directories: a leaderboard of every round's network (alone and with search) and
    the agents without a network, best first, with the win rate per level and over all levels
    (wins/games, Wilson 95% interval); the final train and test losses of every training run; and,
    with --out, the plots as PNG files (leaderboard.png, arena.png, curves.png)."""
    from drmario.run.compare import (
        arena_results,
        final_losses,
        format_leaderboard,
        leaderboard,
        save_figures,
        training_curves,
    )

    results = arena_results(args.run_dirs)
    curves = training_curves(args.run_dirs)
    if results.empty and curves.empty:
        raise ValueError(
            f"no arena tables (analysis*/arena.csv) or training metrics (train*/metrics.csv) in {args.run_dirs}"
        )
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
    rounds): the best analysed round's unless --round is given."""
    from drmario.run.export import card_path, export_network

    out = export_network(args.run_dir, args.out, args.round)
    print(f"wrote {out} and {card_path(out)}")
    return 0


def settings_classes() -> dict[str, type[Settings]]:
    """Every settings class by name: the components' and the notebooks' (by notebook stem)."""
    from drmario.baselines import DQNConfig, TDConfig
    from drmario.learn.net import NetConfig
    from drmario.learn.train import TrainConfig
    from drmario.play.arena import EvalConfig
    from drmario.play.gate import GateConfig
    from drmario.play.selfplay import SelfPlayConfig
    from drmario.run.profiles import NOTEBOOKS
    from drmario.search.config import SearchConfig

    components = (SearchConfig, SelfPlayConfig, NetConfig, TrainConfig, EvalConfig, GateConfig, DQNConfig, TDConfig)
    out: dict[str, type[Settings]] = {cls.__name__: cls for cls in components}
    out.update({nb.stem: nb.settings for nb in NOTEBOOKS.values()})
    out.update({section: nb.settings for section, nb in NOTEBOOKS.items()})
    return out


def cmd_settings(args: argparse.Namespace) -> int:
    """List the settings of a component (SearchConfig, TrainConfig, ...) or a notebook (02_train,
    or its profile section, train): flat name, dotted path, type, default and doc."""
    classes = settings_classes()
    if args.name not in classes:
        print(f"drmario settings: unknown name {args.name!r}; one of: {', '.join(classes)}", file=sys.stderr)
        return 2
    for leaf in classes[args.name].leaves():
        path = f" ({leaf.path})" if leaf.path != leaf.name else ""
        print(f"{leaf.name}{path}: {leaf.type_text} = {leaf.default!r}\n    {leaf.doc}")
    return 0


# ------------------------------------------------------------------------------------------------
# Parser


def build_parser() -> argparse.ArgumentParser:
    from drmario.learn.train import TrainConfig
    from drmario.play.arena import EvalConfig
    from drmario.play.selfplay import SelfPlayConfig
    from drmario.run.agents import AGENT_HELP

    formatter = argparse.ArgumentDefaultsHelpFormatter
    parser = argparse.ArgumentParser(prog="drmario", description="drmario-kit: Dr. Mario, AlphaZero-style")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, func: Any) -> argparse.ArgumentParser:
        doc = func.__doc__ or ""
        p = sub.add_parser(name, help=doc.split("\n")[0], description=doc, formatter_class=formatter)
        p.set_defaults(func=func)
        return p

    play = command("play", cmd_play)
    play.add_argument("--agent", default="greedy", help=f"who plays: {AGENT_HELP}")
    play.add_argument("--network", help="checkpoint for the network agents (or give it as SPEC@PATH)")
    play.add_argument("--device", default="cpu", help="where a network runs")
    play.add_argument("--seed", type=int, default=1234, help="NES RNG seed, 2..65535")
    play.add_argument("--level", type=int, default=0, help="virus level 0..24")
    play.add_argument("--pills", choices=["nes", "iid"], default="nes", help="pill sequence: the NES list or i.i.d.")
    play.add_argument("--stall-limit", type=int, default=None, help="stalemate after this many idle pills (none)")
    play.add_argument("--max-pills", type=int, default=2000, help="stop the game after this many pills")
    play.add_argument("--rng-seed", type=int, default=0, help="seeds the agent's decisions")
    play.add_argument("--verbose", "-v", action="store_true", help="print the board after every move")
    play.add_argument("--delay", type=float, default=0.0, help="seconds to wait after each board (with -v)")
    play.add_argument("--record", action="store_true", help="print the game record as JSON at the end")

    gen = command("generate", cmd_generate)
    gen.add_argument("run_dir", help="run directory (resumes if it holds this run already)")
    gen.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_settings(gen, SelfPlayConfig)

    ev = command("evaluate", cmd_evaluate)
    ev.add_argument("--agents", default="random,greedy,mcts-100", help=f"comma-separated agents: {AGENT_HELP}")
    ev.add_argument("--network", help="checkpoint for the network agents (or give it as SPEC@PATH)")
    ev.add_argument("--device", default="cpu", help="where networks run")
    ev.add_argument("--out", help="write the table as CSV")
    ev.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_settings(ev, EvalConfig)

    tr = command("train", cmd_train)
    tr.add_argument("run_dir", help="run directory (continues the run there, if any)")
    tr.add_argument("data", nargs="*", help="example files or folders (replace the settings' data)")
    tr.add_argument("--no-progress", action="store_true", help="no progress bar")
    tr.add_argument("--threads", type=int, default=0, help="CPU threads for torch (0: its default, every core)")
    add_settings(tr, TrainConfig, skip=("data", "progress"))

    pipe = command("pipeline", cmd_pipeline)
    pipe.add_argument("--profile", default="ci", help="a profile file, or one of the kit's: ci, cpu, gpu")
    pipe.add_argument("--run-dir", help="run directory (default runs/<profile name>)")
    pipe.add_argument(
        "--rounds", type=int, default=1, help="training rounds: 1 is 01 -> 02 -> 03; each more adds 04 -> 02 -> 03"
    )
    pipe.add_argument(
        "--set", action="append", metavar="SECTION.PARAM=VALUE", help="override a profile value, e.g. train.steps=500"
    )
    pipe.add_argument("--baselines", action="store_true", help="finish with 05: the DQN and TD baselines")
    pipe.add_argument("--no-progress", action="store_true", help="no progress bars")

    cmp = command("compare", cmd_compare)
    cmp.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories (of the pipeline) to compare")
    cmp.add_argument("--out", metavar="FOLDER", help="save the plots there as PNG files")

    exp = command("export", cmd_export)
    exp.add_argument("run_dir", help="run directory (of the pipeline)")
    exp.add_argument("--out", required=True, help="the network file to write; its card goes beside it (.json)")
    exp.add_argument("--round", type=int, help="whose network: the one trained after this round (default: the best)")

    st = command("settings", cmd_settings)
    st.add_argument("name", help="SearchConfig, SelfPlayConfig, NetConfig, TrainConfig, EvalConfig, ... or a notebook")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError, RunError) as e:  # RunError: a busy run directory, a dead worker
        print(f"drmario {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
