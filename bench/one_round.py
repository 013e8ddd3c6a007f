"""One more round from the shipped network: which self-play setting makes the better next network,
and how much do two trainings of the same data differ?

`prepare` makes, in --run-dir (default runs/exp):

- ``round0``: the CPU profile's round-0 data again (2,000 expert games, seed 0: the same games as
  the shipped run's round 0);
- one self-play round per variant with the profile's round settings (600 games at levels 14 to 24,
  Gumbel search with 8 simulations, the expert's labels, a stalemate after 40 pills as a loss) from
  the shipped network on new seeds (seed 7), the variants differing only in their flags (`VARIANTS`:
  ``ctl`` the profile's; ``rescue`` the expert plays stalled stretches, `rescue_after`; ``noise0``
  without Gumbel noise after the sampled opening, so that the search's best move is played; ``pcr``
  noise0 with playout cap randomisation, a quarter of the moves searched in full and labelled, in
  the time noise0's games take);
- ``train-VARIANT-seedS``: the shipped network trained 1,500 steps on round 0's and the variant's
  examples (the profile's warm-start settings) with training seed S (the split and batch order).

Then `search_vs_expert.py --against LABEL=CHECKPOINT ...` plays each network with 100 simulations
and alone on the 100 evaluation games, and `summary NAME,...` reads those runs' per-game CSVs
and writes the paired table (every network against the shipped one, and against the control of the
same training seed) to bench/results/one-round-MACHINE.json.

`heldout LABEL=CHECKPOINT,...` compares networks on held-out DAgger positions (the shipped
network's games on other seeds, labelled by the expert): agreement with the expert, cross-entropy,
value errors, and each network's agreement paired with the first's, to
bench/results/one-round-heldout-MACHINE.json.

Run: `python bench/one_round.py prepare --seeds 0,1`; then, in bench/, for example
`python search_vs_expert.py --others expert,policy --name search100-round-ctl
--against ctl-seed0=../runs/exp/train-ctl-seed0/checkpoints/latest.pt`; then
`python bench/one_round.py summary search100-round-ctl,...`. (The first runs, on a 2-core AMD EPYC,
labelled the networks ctl, rescue, noise0 and seed1 for ctl-seed1, trained in train-ctl, ...; the
summary's --labels maps them.)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from common import REPO, RESULTS, machine_info, machine_slug, report

from drmario.play.gate import bootstrap_interval, mcnemar_p

VARIANTS = {
    "ctl": [],
    "rescue": ["--rescue-after", "20"],
    "noise0": ["--gumbel-noise", "0"],
    # playout cap randomisation after noise0: a quarter of the moves searched in full and labelled, the rest with
    # 2 simulations; 1,050 games are what it played in the 385 s noise0's 600 took (2-core Intel Xeon)
    "pcr": ["--gumbel-noise", "0", "--full-search-share", "0.25", "--fast-simulations", "2", "--games", "1050"],
}
ROUND0 = "--games 2000 --epsilon 0.1 --levels [0,2,4,6,8,10,12,14,16,18,20,22,24] --seed 0 --mode expert"
ROUND0 += " --stall-limit None --max-pills 1000 --games-per-shard 100 --workers 2"
SELFPLAY = "--games 600 --levels [14,16,18,20,22,24] --seed 7 --mode gumbel --simulations 8 --labels expert"
SELFPLAY += " --temperature-moves 8 --stall-limit 40 --stalemate-won -1 --max-pills 1000 --games-per-shard 75"
SELFPLAY += " --workers 2 --network data/networks/small.pt"
HELDOUT = SELFPLAY + " --games 150 --seed 8 --gumbel-noise 0"  # (the last of a repeated flag counts)
TRAIN = "--threads 1 --planes 24 --count-error scaled --filters 32 --blocks 4 --head conv --optimizer adamw --lr 0.002"
TRAIN += " --warmup-steps 200 --schedule cosine --batch-size 256 --steps 1500 --augment true --test-fraction 0.05"
TRAIN += " --log-every 50 --eval-every 500 --checkpoint-every 500 --device cpu --init data/networks/small.pt"


def drmario(*args: str) -> None:
    """python -m drmario ARGS in the repository (it resumes a run directory it has started)."""
    subprocess.run([sys.executable, "-m", "drmario", *args, "--no-progress"], cwd=REPO, check=True)


def prepare(run_dir: Path, variants: list[str], seeds: list[int]) -> None:
    drmario("generate", str(run_dir / "round0"), *ROUND0.split())
    for name in variants:
        drmario("generate", str(run_dir / name), *SELFPLAY.split(), *VARIANTS[name])
        for seed in seeds:
            data = [str(run_dir / "round0" / "examples"), str(run_dir / name / "examples")]
            drmario("train", str(run_dir / f"train-{name}-seed{seed}"), *data, *TRAIN.split(), "--seed", str(seed))


def heldout(run_dir: Path, networks: dict[str, str]) -> None:
    """Each network's agreement with the expert, cross-entropy and value errors on held-out DAgger
    positions: the shipped network's own games with noise0's settings on other seeds (seed 8, 150
    games; as every run's games, drawn independently from the self-play seeds, so a few may repeat a
    training game), labelled by the expert; each network after the first also paired with it (the
    difference in agreement, with a 95% bootstrap interval over games)."""
    import torch

    from drmario.learn.dataset import load_examples
    from drmario.learn.player import load_player
    from drmario.learn.train import move_scores, value_errors

    torch.set_num_threads(2)
    drmario("generate", str(run_dir / "heldout"), *HELDOUT.split())
    examples = load_examples(run_dir / "heldout" / "examples", progress=False)
    games, per_game = np.unique(examples.game, return_inverse=True)
    figures: dict = {"positions": len(examples), "games": len(games)}
    first = None
    for label, path in networks.items():
        player = load_player(REPO / path)
        hits, cross_entropy = move_scores(player, examples)
        row: dict[str, object] = {
            "agreement": round(float(hits.mean()), 4),
            "cross-entropy": round(float(cross_entropy.mean()), 4),
        }
        row |= {k: round(v, 4) for k, v in value_errors(player, examples).items()}
        if first is None:
            first = (label, hits)
        else:  # the games resampled, each with all its positions
            diff = np.bincount(per_game, hits.astype(float) - first[1], len(games))
            counts = np.bincount(per_game, minlength=len(games))
            draws = np.random.default_rng(0).integers(0, len(games), (5000, len(games)))
            ratios = diff[draws].sum(axis=1) / counts[draws].sum(axis=1)
            low, high = np.percentile(ratios, [2.5, 97.5])
            mean = float(hits.mean() - first[1].mean())
            row[f"agreement minus {first[0]}'s, 95%"] = [round(v, 4) for v in (mean, float(low), float(high))]
        figures[label] = row
    report("one-round-heldout", {"heldout": HELDOUT, "networks": networks}, figures)


def paired(frames: pd.DataFrame, new: str, old: str) -> dict:
    """McNemar's exact test on wins, and pills per virus on the games both won (paired bootstrap),
    of two agents' games in frames (one row per agent and game)."""
    x = frames[frames.agent == new].set_index("seed")
    y = frames[frames.agent == old].set_index("seed").loc[x.index]
    x_won, y_won = (x.outcome == "won").to_numpy(), (y.outcome == "won").to_numpy()
    both = x_won & y_won
    x_ppv = (x.pills / x.viruses_cleared.clip(lower=1)).to_numpy()
    y_ppv = (y.pills / y.viruses_cleared.clip(lower=1)).to_numpy()
    diffs = (x_ppv - y_ppv)[both]
    low, high = bootstrap_interval(diffs)
    b, c = int((x_won & ~y_won).sum()), int((y_won & ~x_won).sum())
    return {
        "wins": f"{int(x_won.sum())}-{int(y_won.sum())} of {len(x)}",
        "wins_p": round(mcnemar_p(b, c), 4),
        "pill caps": f"{int((x.outcome == 'pill_cap').sum())}-{int((y.outcome == 'pill_cap').sum())}",
        "both won": int(both.sum()),
        "pills per virus": [round(float(x_ppv[both].mean()), 3), round(float(y_ppv[both].mean()), 3)],
        "difference, 95%": [round(float(diffs.mean()), 3), round(low, 3), round(high, 3)],
    }


def summary(names: list[str], labels: dict[str, str]) -> None:
    slug = machine_slug(machine_info())
    frames = pd.concat([pd.read_csv(RESULTS / f"{n}-{slug}.csv") for n in names])
    frames = frames.drop_duplicates(["agent", "seed", "level"])  # a game is its seed and level
    kinds, _, tails = frames.agent.str.partition(" ").T.to_numpy()
    frames["agent"] = [f"{k} {labels.get(t, t)}".strip() for k, t in zip(kinds, tails)]
    agents = list(dict.fromkeys(frames.agent))
    figures: dict = {}
    for agent in agents:
        games = frames[frames.agent == agent]
        won = games.outcome == "won"
        figures[agent] = (
            f"{int(won.sum())}/{len(games)} wins, {int((games.outcome == 'pill_cap').sum())} at the pill cap, "
            f"{(games.pills[won] / games.viruses_cleared[won]).mean():.3f} pills per virus (mean over the won games)"
        )
    for agent in agents:
        kind, _, label = agent.partition(" ")
        if not label or kind not in agents:
            continue
        figures[f"{agent} vs {kind}"] = paired(frames, agent, kind)
        seed = label.rpartition("-")[2]
        control = f"{kind} ctl-{seed}"
        if not label.startswith("ctl") and control in agents:
            figures[f"{agent} vs {control}"] = paired(frames, agent, control)
    controls = [a for a in agents if " ctl-" in a and a.startswith("net-mcts")]
    for i, a in enumerate(controls):  # the same data trained twice: the spread of one training
        for b in controls[i + 1 :]:
            figures[f"{a} vs {b}"] = paired(frames, a, b)
    figures["evaluation games"] = int(np.mean([len(frames[frames.agent == a]) for a in agents]))
    settings = {"results": names, "labels": labels, "variants": VARIANTS, "selfplay": SELFPLAY, "train": TRAIN}
    report("one-round", settings, figures)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="the data and the networks")
    p.add_argument("--run-dir", type=Path, default=REPO / "runs" / "exp")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--seeds", default="0,1", help="training seeds")
    h = sub.add_parser("heldout", help="agreement and value errors on held-out DAgger positions")
    h.add_argument("networks", help="LABEL=CHECKPOINT,...: the first is the one the others are paired with")
    h.add_argument("--run-dir", type=Path, default=REPO / "runs" / "exp")
    s = sub.add_parser("summary", help="the paired table from search_vs_expert.py's CSVs")
    s.add_argument("names", help="comma-separated result names (bench/results/NAME-MACHINE.csv)")
    s.add_argument("--labels", default="", help="OLD=NEW,...: agent labels renamed to VARIANT-seedS")
    args = parser.parse_args()
    if args.command == "prepare":
        prepare(args.run_dir, args.variants.split(","), [int(v) for v in args.seeds.split(",")])
    elif args.command == "heldout":
        heldout(args.run_dir, dict(kv.split("=", 1) for kv in args.networks.split(",")))
    else:
        summary(args.names.split(","), dict(kv.split("=") for kv in args.labels.split(",") if kv))


if __name__ == "__main__":
    main()
