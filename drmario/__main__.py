"""Command line: ``python -m drmario <command>`` (or ``drmario <command>`` once installed)."""

from __future__ import annotations

import argparse
import sys

import numpy as np


def cmd_play(args: argparse.Namespace) -> int:
    """Play one game with uniformly random legal moves and print it."""
    from .game import Game

    rng = np.random.default_rng(args.rng_seed)
    game = Game(args.seed, args.level, pill_mode=args.pills, stall_limit=args.stall_limit or None)
    print(f"seed {args.seed}, level {args.level}, {game.viruses_left} viruses, {args.pills} pills\n{game.board}\n")
    while not game.over:
        pill, moves = game.pill, game.legal_moves()
        move = moves[rng.integers(len(moves))]
        result = game.play(move)
        if args.verbose or result.viruses_cleared:
            print(
                f"pill {game.pills_used:3d} {pill}  move {tuple(move)}  cleared {result.viruses_cleared} "
                f"virus(es), {game.viruses_left} left"
            )
    print(
        f"\n{game.board}\n\n{game.outcome.value} after {game.pills_used} pills, {game.viruses_cleared} viruses cleared"
    )
    if args.record:
        print(game.record(agent="random", rng_seed=args.rng_seed).to_json())
    return 0


def _ints(text: str) -> list[int]:
    """'0,5,10' or '0-20:5' (start-stop:step, stop included) or a mix: '0,3-6'."""
    out: list[int] = []
    for part in text.split(","):
        if "-" in part:
            span, _, step = part.partition(":")
            lo, hi = span.split("-")
            out += list(range(int(lo), int(hi) + 1, int(step or 1)))
        elif part:
            out.append(int(part))
    return out


def cmd_generate(args: argparse.Namespace) -> int:
    """Self-play games with search, written as training examples into a run directory."""
    from .search import SearchConfig
    from .selfplay import SelfPlayConfig, generate

    search = SearchConfig(
        mode=args.mode,
        simulations=args.simulations,
        root_rollouts=args.root_rollouts,
        rollout_policy=args.rollout_policy,
    )
    cfg = SelfPlayConfig(
        games=args.games,
        levels=args.levels,
        seed=args.seed,
        search=search,
        network=args.network,
        device=args.device,
        workers=args.workers,
        games_per_shard=args.games_per_shard,
        temperature_moves=args.temperature_moves,
    )
    print(generate(cfg, args.run_dir).to_string())
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Agents play the same fixed games; prints (and optionally writes) the arena table."""
    from .arena import arena, evaluation_games, make_agent

    agents = [make_agent(spec, args.device) for spec in args.agents.split(",")]
    games = evaluation_games(args.levels, args.games_per_level, seed=args.seed)
    table, _ = arena(agents, games, lockstep=args.lockstep, stall_limit=args.stall_limit or None)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.out:
        table.to_csv(args.out, index=False)
    return 0


def _read_settings(path: str | None, overrides: list[str]) -> dict:
    """Settings from a YAML or JSON file (or none), then ``key=value`` overrides with dotted keys
    into nested settings (``net.filters=16``); values are read as YAML (``500``, ``true``, ``[0, 4]``)."""
    from pathlib import Path

    import yaml

    settings: dict = {}
    if path:
        try:
            settings = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError) as e:
            raise ValueError(f"{path}: cannot read the settings: {e}") from e
        if not isinstance(settings, dict):
            raise ValueError(f"{path}: expected a mapping of settings, got {type(settings).__name__}")
    for text in overrides:
        key, sep, raw = text.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set {text!r}: expected key=value, e.g. steps=500 or net.filters=16")
        *parents, leaf = key.strip().split(".")
        node = settings
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f"--set {text!r}: {part} is not a group of settings")
        try:
            node[leaf] = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError as e:
            raise ValueError(f"--set {text!r}: the value is not valid YAML: {e}") from e
    return settings


def cmd_train(args: argparse.Namespace) -> int:
    """Train (or continue training) a network on example files in a run directory. Exit status 3
    when training stopped early (e.g. a non-finite loss), 2 for bad settings or data."""
    import json
    from pathlib import Path

    from .files import write_atomic
    from .notebook import result_to_json
    from .train import TrainConfig, train

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    settings = _read_settings(args.config, args.set or [])
    if args.data:
        settings["data"] = args.data
    if args.no_progress:
        settings["progress"] = False
    cfg = TrainConfig.from_dict(settings)
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
    from .pipeline import PipelineError, run_pipeline

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


def build_parser() -> argparse.ArgumentParser:
    from .arena import AGENT_SPECS

    parser = argparse.ArgumentParser(prog="drmario", description="drmario-kit: Dr. Mario AlphaZero-style")
    sub = parser.add_subparsers(dest="command", required=True)

    play = sub.add_parser("play", help=cmd_play.__doc__, description=cmd_play.__doc__)
    play.add_argument("--seed", type=int, default=1234, help="NES RNG seed, 2..65535")
    play.add_argument("--level", type=int, default=0, help="level 0..24")
    play.add_argument("--pills", choices=["nes", "iid"], default="nes", help="pill sequence mode")
    play.add_argument("--stall-limit", type=int, default=20, help="stalemate after this many idle pills (0: off)")
    play.add_argument("--rng-seed", type=int, default=0, help="seed of the random player")
    play.add_argument("--verbose", "-v", action="store_true", help="print every move")
    play.add_argument("--record", action="store_true", help="print the game record as JSON")
    play.set_defaults(func=cmd_play)

    gen = sub.add_parser("generate", help=cmd_generate.__doc__, description=cmd_generate.__doc__)
    gen.add_argument("run_dir", help="run directory (resumes if it holds this run already)")
    gen.add_argument("--games", type=int, default=64)
    gen.add_argument("--levels", type=_ints, default=[0, 2, 4, 6, 8, 10], help="e.g. 0,5,10 or 0-20:2")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--mode", choices=["round0", "puct", "gumbel"], default="round0")
    gen.add_argument("--simulations", type=int, default=200)
    gen.add_argument("--root-rollouts", type=int, default=2)
    gen.add_argument("--rollout-policy", choices=["random", "greedy"], default="random")
    gen.add_argument("--network", help="checkpoint for round N (puct/gumbel)")
    gen.add_argument("--device", default="cpu")
    gen.add_argument("--workers", type=int, default=1)
    gen.add_argument("--games-per-shard", type=int, default=16)
    gen.add_argument("--temperature-moves", type=int, default=0, help="sample moves for this many first pills")
    gen.set_defaults(func=cmd_generate)

    ev = sub.add_parser("evaluate", help=cmd_evaluate.__doc__, description=cmd_evaluate.__doc__)
    ev.add_argument("--agents", default="random,greedy,mcts:100", help="comma-separated: " + AGENT_SPECS)
    ev.add_argument("--levels", type=_ints, default=[0, 5, 10, 15, 20])
    ev.add_argument("--games-per-level", type=int, default=20)
    ev.add_argument("--seed", type=int, default=2024, help="fixes the evaluation games")
    ev.add_argument("--lockstep", type=int, default=16)
    ev.add_argument("--stall-limit", type=int, default=20, help="0: no stalemates")
    ev.add_argument("--device", default="cpu", help="where networks run")
    ev.add_argument("--out", help="write the table as CSV")
    ev.set_defaults(func=cmd_evaluate)

    tr = sub.add_parser("train", help=cmd_train.__doc__, description=cmd_train.__doc__)
    tr.add_argument("run_dir", help="run directory (continues the run there, if any)")
    tr.add_argument("data", nargs="*", help="example files or folders (replace the settings' data)")
    tr.add_argument("--config", help="TrainConfig settings, YAML or JSON (missing keys: defaults)")
    tr.add_argument(
        "--set", action="append", metavar="KEY=VALUE", help="a setting, e.g. steps=500 or net.filters=16 (repeatable)"
    )
    tr.add_argument("--no-progress", action="store_true", help="no progress bar")
    tr.add_argument("--threads", type=int, default=0, help="CPU threads for torch (0: its default, every core)")
    tr.set_defaults(func=cmd_train)

    pipe = sub.add_parser("pipeline", help=cmd_pipeline.__doc__, description=cmd_pipeline.__doc__)
    pipe.add_argument("--profile", default="params/ci.yaml", help="parameter profile (default params/ci.yaml)")
    pipe.add_argument("--run-dir", help="run directory (default runs/<profile name>)")
    pipe.add_argument(
        "--rounds", type=int, default=1, help="training rounds: 1 is 01 -> 02 -> 03; each more adds 04 -> 02 -> 03"
    )
    pipe.add_argument(
        "--set", action="append", metavar="SECTION.PARAM=VALUE", help="override a profile value, e.g. train.steps=500"
    )
    pipe.add_argument("--baselines", action="store_true", help="finish with 05: the DQN and TD baselines")
    pipe.add_argument("--no-progress", action="store_true", help="no progress bars")
    pipe.set_defaults(func=cmd_pipeline)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ValueError as e:
        print(f"drmario {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
