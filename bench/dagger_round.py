"""One DAgger round from the shipped apprentice, without a GPU: does training on the positions its own
games reach, labelled by its depth-3 teacher, make it play better?

The `gpu-quick` profile's round 1 at the scale of 2 CPU cores (`prepare`; on the 2-core Xeon about
26 minutes of games and 55 of training):

- 1,200 games (the profile: 2,400) at levels 14 to 24 played by the network with 8 simulations of
  Gumbel search (no root noise after the 8-pill opening), every position labelled by expert3 (the
  depth-3 expert), a stalemate (40 pills that clear nothing) a loss; the network in bfloat16
  (`generate --dtype`); seed 1, as the pipeline's round 1;
- 150 more such games (seed 2) that no training uses: held-out positions of the network's own games;
- the network trained further on round 0's examples (--round0: the examples of the run that made it)
  and the 1,200 games' (700 steps of 1,024 at a peak rate of 5e-4, 70 warm-up steps, cosine, CPU bf16
  autocast, training seed 1; the profile: 2,500 steps at 2e-3 on a GPU).

`games` makes the games alone (`--expert-depth`: the labelling expert's). `train` repeats the round's
training on round 0's examples plus other ones (--examples): with none, round 0's alone (the control,
`--out train-control`: what the 700 further steps do without the round's games, so that the round's
change can be told from the extra training's); with the round's games labelled again by a stronger
teacher (`bench/relabel.py`), what that teacher's labels do. `--device cuda` trains on a GPU
(`bench/gpu_dagger.sh`: one lent-GPU call for both teachers' trainings).

`gate` plays the new network and the old one alone on the gate's 100 games (levels 15 and 20, the
gating seeds; `play.gate`) and writes the gate's paired comparison and decision to
bench/results/NAME-MACHINE.json. The other figures come from the kit's benches: held-out agreement
with the teacher by `capacity.py held-out` (on the held-out games above and on depth-3 expert games
of another seed), play on the evaluation games by `search_vs_expert.py --dtype bfloat16` and `pair.py`.

Run: `python bench/dagger_round.py prepare --round0 runs/quick/round0/examples`, then
`python bench/dagger_round.py gate --new runs/ap-r1/train1/checkpoints/latest.pt`; the control:
`python bench/dagger_round.py train --round0 runs/quick/round0/examples --out train-control`.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import get_args

from common import REPO, report
from one_round import drmario

from drmario.play.gate import GateConfig, compare, play_gate
from drmario.run.agents import DTYPE_HELP, DTYPES, make_agent
from drmario.search.expert import ExpertDepth

SELFPLAY = "--levels [14,16,18,20,22,24] --mode gumbel --simulations 8 --gumbel-noise 0 --labels expert"
SELFPLAY += " --temperature-moves 8 --stall-limit 40 --stalemate-won -1 --max-pills 1000"
SELFPLAY += " --workers 2 --dtype bfloat16"
TRAIN = "--planes 24 --count-error scaled --filters 128 --blocks 10 --head conv --value-weight 0.1 --optimizer adamw"
TRAIN += " --lr 0.0005 --warmup-steps 70 --schedule cosine --batch-size 1024 --steps 700 --augment true"
TRAIN += " --test-fraction 0.05 --seed 1 --log-every 25 --eval-every 350 --checkpoint-every 100"
TRAIN += " --keep-checkpoints 2 --threads 2"
DEVICES = {"cpu": "--device cpu --cpu-bf16 true", "cuda": "--device cuda --amp true"}  # bf16 either way


def games(run_dir: Path, network: str, expert_depth: int = 3, more: str = "") -> None:
    """The round's games and the held-out games (each resumes where it stopped; more: other generate
    flags, which override the round's)."""
    for name, (count, seed, shard) in {"round1": ("1200", "1", "50"), "own-held-out": ("150", "2", "25")}.items():
        args = ["--games", count, "--seed", seed, "--games-per-shard", shard, "--network", network, *SELFPLAY.split()]
        drmario("generate", str(run_dir / name), *args, "--expert-depth", str(expert_depth), *more.split())


def train(
    run_dir: Path, network: str, round0: Path, examples: list[Path], out: str, device: str = "cpu", more: str = ""
) -> None:
    """The round's training on round 0's examples and the given ones, into run_dir / out (more: other
    train flags, which override the round's)."""
    data = [str(path.resolve()) for path in (round0, *examples)]  # the commands run in the repository
    flags = [*TRAIN.split(), *DEVICES[device].split(), *more.split()]
    drmario("train", str(run_dir / out), *data, "--init", network, *flags)


def gate(new: str, old: str, dtype: str, name: str) -> None:
    """Both networks alone on the gating games, paired, and the gate's decision."""
    cfg = GateConfig()
    records, seconds = {}, {}
    for label, network in (("new", new), ("old", old)):
        start = time.perf_counter()
        records[label] = play_gate(make_agent(cfg.agent, network=network, dtype=dtype), cfg)
        seconds[label] = round(time.perf_counter() - start, 1)
    result = compare(records["new"], records["old"], cfg.alpha)
    settings = {"new": new, "old": old, "dtype": dtype, "gate": cfg.to_dict(), "seconds": seconds}
    report(name, settings, result.to_dict())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="the games and the training")
    m = sub.add_parser("games", help="the round's games and the held-out games only")
    m.add_argument("--expert-depth", type=int, choices=get_args(ExpertDepth), default=3, help="the labelling expert's")
    m.add_argument("--generate-flags", default="", help="drmario generate flags over the round's ('--workers 16')")
    t = sub.add_parser("train", help="the round's training on round 0's examples and --examples")
    t.add_argument("--examples", type=Path, nargs="*", default=[], help="more example folders (none: the control)")
    t.add_argument("--out", required=True, help="the training's folder under --run-dir")
    t.add_argument("--device", choices=sorted(DEVICES), default="cpu", help="where it trains (bf16 autocast on both)")
    t.add_argument("--train-flags", default="", help="drmario train flags over the round's (a dry run: '--steps 2')")
    for q in (p, m, t):
        q.add_argument("--run-dir", type=Path, default=REPO / "runs" / "ap-r1")
        q.add_argument("--network", default="data/networks/apprentice.pt", help="the network of the round before")
    for q in (p, t):
        q.add_argument("--round0", type=Path, required=True, help="round 0's examples (the network's training data)")
    g = sub.add_parser("gate", help="the gate's games and decision")
    g.add_argument("--new", required=True, help="the new network's checkpoint")
    g.add_argument("--old", default="apprentice", help="the network of the round before (a checkpoint or a name)")
    g.add_argument("--dtype", choices=DTYPES, default="bfloat16", help=DTYPE_HELP)
    g.add_argument("--name", default="dagger-round-gate", help="result file name")
    args = parser.parse_args()
    if args.command != "gate":
        args.run_dir = args.run_dir.resolve()  # the commands run in the repository
    if args.command == "prepare":
        games(args.run_dir, args.network)
        train(args.run_dir, args.network, args.round0, [args.run_dir / "round1" / "examples"], "train1")
    elif args.command == "games":
        games(args.run_dir, args.network, args.expert_depth, args.generate_flags)
    elif args.command == "train":
        train(args.run_dir, args.network, args.round0, args.examples, args.out, args.device, args.train_flags)
    else:
        gate(args.new, args.old, args.dtype, args.name)


if __name__ == "__main__":
    main()
