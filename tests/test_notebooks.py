"""The notebook pipeline: committed notebooks are clean, every parameter is a real setting of its
type, profiles are checked before anything runs, the CI profile runs the whole chain
(01 -> 02 -> 03 -> 04 -> 02 -> 03 -> 05) and leaves what it should, and the `train` and `pipeline`
commands. The installed wheel's round is in test_robustness.py, nbval in test_nbval.py."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import nbformat
import numpy as np
import pandas as pd
import pytest
import torch
from helpers import executed_without_errors

from drmario.files import file_sha256, played_network, record_network
from drmario.learn.checkpoint import read_checkpoint
from drmario.learn.dataset import load_examples
from drmario.learn.example_files import read_examples
from drmario.learn.player import load_player
from drmario.play.shards import read_records
from drmario.run import pipeline as P
from drmario.run import profiles as R
from drmario.run.cli import main
from drmario.run.rounds import (
    best_checkpoint,
    checkpoint_path,
    refit_checkpoint,
    trained_checkpoint,
)
from drmario.settings import SettingsError, load_yaml

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CHAIN = [ROOT / "notebooks" / f"{nb.stem}.ipynb" for nb in R.NOTEBOOKS.values()]
PROFILES = sorted((ROOT / "params").glob("*.yaml"))
DATA = ROOT / "data"
CI = load_yaml((ROOT / "params" / "ci.yaml").read_text())


# ------------------------------------------------------------------------------------------------
# Committed notebooks and profiles


def test_the_chain_notebooks_exist():
    assert all(p.is_file() for p in CHAIN), [p.name for p in CHAIN if not p.is_file()]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_notebooks_carry_no_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert "papermill" not in nb.metadata and "widgets" not in nb.metadata, "executed-notebook metadata"
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{path.name} cell {i} has outputs: strip them before committing"
            assert cell.execution_count is None, f"{path.name} cell {i} has an execution count"


def notebook_parameters(path: Path) -> dict[str, dict]:
    import papermill as pm

    return pm.inspect_notebook(str(path))


def notebook_defaults(path: Path) -> dict[str, Any]:
    """The values of a notebook's parameters cell (literals)."""
    return {name: eval(info["default"]) for name, info in notebook_parameters(path).items()}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_parameter_is_a_setting_of_its_type_with_help(path):
    nb = nbformat.read(path, as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{path.name}: {len(tagged)} cells tagged parameters"
    lines = [ln for ln in tagged[0].source.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    params = notebook_parameters(path)
    assert len(params) == len(lines), f"{path.name}: papermill cannot read every line (one '=' per line)"
    settings = R.parameters(R.section_of(path.stem))
    for name, info in params.items():
        assert name in settings, f"{path.name}: {name} is not a setting of {path.stem}"
        assert info["help"], f"{path.name}: {name} has no help comment"
        want = R.annotation(settings[name].type)
        assert info["inferred_type_name"] == want, f"{path.name}: {name} is annotated {info['inferred_type_name']}"
    defaults = notebook_defaults(path)
    R.build(R.section_of(path.stem), defaults)  # the defaults are valid settings
    index = nb.cells.index(tagged[0])
    assert f'notebook_settings("{path.stem}", globals())' in nb.cells[index + 1].source


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.name)
def test_profiles_fit_the_notebooks(path):
    profile = P.load_profile(path)
    assert profile["name"] == path.stem
    assert set(profile) <= {"name", *R.NOTEBOOKS}
    R.check_profile(profile, devices=False)  # the gpu profile names cuda, which CI's machine lacks
    assert R.unread_settings(profile) == []
    for section, values in profile.items():  # papermill warns of a parameter its cell does not list
        if section != "name":
            listed = notebook_parameters(ROOT / "notebooks" / f"{R.NOTEBOOKS[section].stem}.ipynb")
            assert set(values) <= set(listed), f"{path.name}: {section} sets {set(values) - set(listed)}"


def test_settings_a_profile_sets_that_its_mode_never_reads_are_named(tmp_path):
    # the gpu profile's round 0 once set MCTS settings that its mode, the expert, never reads
    (tmp_path / "mixed.yaml").write_text("round0_data:\n  mode: expert\n  simulations: 400\n  root_rollouts: 2\n")
    assert R.unread_settings(R.load_profile(tmp_path / "mixed.yaml")) == [
        "round0_data.simulations = 400: mode 'expert' does not read it",
        "round0_data.root_rollouts = 2: mode 'expert' does not read it (mode round0's setting)",
    ]
    switched = R.apply_overrides(R.load_profile("cpu"), ["next_round.mode=puct"])  # noted, not refused
    assert R.unread_settings(switched) == [
        "next_round.gumbel_noise = 0: mode 'puct' does not read it (mode gumbel's setting)"
    ]
    timed = R.apply_overrides(R.load_profile("ci"), ["analysis.speed=hi"])  # the speed without NES timing
    assert R.unread_settings(timed) == [
        "analysis.speed = 'hi': not read with timing = 'free' (the speed is for timing 'nes')"
    ]
    assert R.unread_settings(R.apply_overrides(timed, ["analysis.timing=nes"])) == []
    assert R.unread_settings(R.apply_overrides(R.load_profile("cpu"), ["round0_data.value_seed=7"])) == [
        "round0_data.value_seed = 7: not read with value_games = 0"  # the ci profile's value games read it
    ]
    lines: list[str] = []
    overrides = ["round0_data.c_puct=2"]
    P.run_pipeline("ci", tmp_path / "run", overrides=overrides, stop_before="01", progress=False, log=lines.append)
    assert lines[0] == "unread setting, round0_data.c_puct = 2: mode 'expert' does not read it (mode puct's setting)"


def test_a_profile_is_checked_against_what_its_notebooks_run_with(tmp_path):
    """Where a profile sets nothing, a notebook runs with its parameters cell's value, not its settings
    class's default: 04's cell plays Gumbel (the class: round 0's MCTS), 03's also calibrates mcts-16."""
    (tmp_path / "p.yaml").write_text(
        "next_round:\n  gumbel_m: 8\n  c_puct: 2\nanalysis:\n  agents: [random, greedy, policy, net-mcts-16]\n"
    )
    profile = P.load_profile(tmp_path / "p.yaml")
    with pytest.raises(SettingsError, match=r"analysis\.calibration_agents = .*\['mcts-16'\] are not among the agents"):
        R.check_profile(profile, devices=False)
    fixed = R.apply_overrides(profile, ["analysis.calibration_agents=[net-mcts-16]"])
    R.check_profile(fixed, devices=False)
    # 03's replayed game is checked here too, not after 01's and 02's work (the ci profile plays 12 games)
    with pytest.raises(SettingsError, match=r"analysis\.replay_game = 12: expected < 12, the games played"):
        R.check_profile(R.apply_overrides(P.load_profile("ci"), ["analysis.replay_game=12"]), devices=False)
    assert R.unread_settings(fixed) == ["next_round.c_puct = 2: mode 'gumbel' does not read it (mode puct's setting)"]
    assert R.section_values(fixed, "next_round")["mode"] == R.notebook_values("04_next_round")["mode"] == "gumbel"


def test_a_profile_starts_from_its_base(tmp_path):
    cpu, cpu64 = P.load_profile("cpu"), P.load_profile("cpu64")
    assert cpu64["name"] == "cpu64" and (cpu["train"]["filters"], cpu64["train"]["filters"]) == (32, 64)
    assert cpu64["train"]["lr"] == cpu["train"]["lr"] and cpu64["round0_data"] == cpu["round0_data"]
    assert cpu64["next_round"] == {**cpu["next_round"], "dtype": "bfloat16"}

    (tmp_path / "base.yaml").write_text("train:\n  steps: 7\n  lr: 0.1\n")
    (tmp_path / "child.yaml").write_text("base: base.yaml\ntrain:\n  steps: 9\n")
    child = P.load_profile(tmp_path / "child.yaml")
    assert child == {"name": "child", "train": {"steps": 9, "lr": 0.1}}

    (tmp_path / "a.yaml").write_text("base: b.yaml\n")
    (tmp_path / "b.yaml").write_text("base: a.yaml\n")
    with pytest.raises(ValueError, match=r"a\.yaml: its bases form a loop \(.*a\.yaml -> .*b\.yaml -> .*a\.yaml\)"):
        P.load_profile(tmp_path / "a.yaml")
    (tmp_path / "lost.yaml").write_text("base: nowhere\n")
    with pytest.raises(ValueError, match=r"lost\.yaml: base 'nowhere': no profile 'nowhere'"):
        P.load_profile(tmp_path / "lost.yaml")
    (tmp_path / "typo.yaml").write_text("base: cpu\ntrian:\n  steps: 3\n")
    with pytest.raises(ValueError, match=r"profile .*typo\.yaml: unknown profile section 'trian'"):
        P.load_profile(tmp_path / "typo.yaml")
    (tmp_path / "odd.yaml").write_text("base: [cpu]\n")
    with pytest.raises(ValueError, match=r"odd\.yaml: base must name a profile, got \['cpu'\]"):
        P.load_profile(tmp_path / "odd.yaml")


def test_a_run_whose_self_play_rounds_share_a_seed_is_refused(tmp_path):
    for path in PROFILES:
        R.check_seeds(P.load_profile(path), rounds=6)
    ci = P.load_profile("ci")  # round 0's seed 0, the value games' 1000, round k's 0 + k
    R.check_seeds(P.apply_overrides(ci, ["next_round.seed=1"]), rounds=1)  # one round: no later games
    with pytest.raises(SettingsError) as info:
        R.check_seeds(P.apply_overrides(ci, ["next_round.seed=997"]), rounds=4)
    assert info.value.problems == [
        "seed 1000 plays the same games for the value games (round0_data.value_seed) and round 3 (next_round.seed + 3)"
    ]
    moved = P.apply_overrides(ci, ["round0_data.seed=2"])
    with pytest.raises(
        SettingsError, match=r"seed 2 plays the same games for round 0 \(round0_data\.seed\) and round 2"
    ):
        P.run_pipeline(moved, tmp_path / "run", rounds=3, progress=False)
    assert not (tmp_path / "run").exists()  # refused before anything is written


def test_profile_values_are_checked_before_anything_runs():
    profile = P.load_profile("ci")
    with pytest.raises(SettingsError, match=r"train\.stpes: not a parameter of 02_train; did you mean steps"):
        R.check_profile(P.apply_overrides(profile, ["train.stpes=5"]))
    with pytest.raises(SettingsError, match=r"train\.lr = 'fast': expected a finite number"):
        R.check_profile(P.apply_overrides(profile, ["train.lr=fast"]))
    with pytest.raises(SettingsError, match="set by the pipeline"):
        R.check_profile(P.apply_overrides(profile, ["train.data=[x]"]))
    bad = ["train.steps=-5", "train.lr=.nan", "train.batch_size=0", "train.test_fraction=1.5", "train.filters=0"]
    bad += ["analysis.levels=[0, 4, 99]", "train.log_every=1e20", "round0_data.games=true"]
    with pytest.raises(SettingsError) as info:
        R.check_profile(P.apply_overrides(profile, bad))
    assert len(info.value.problems) == len(bad), info.value  # every bad value named, at once
    devices = ["train.device=cuda:99", "analysis.device=tpu"]  # no machine has 100 GPUs
    with pytest.raises(SettingsError) as info:
        R.check_profile(P.apply_overrides(profile, devices))
    assert [p.split(":")[0] for p in info.value.problems] == ["train.device = 'cuda", "analysis.device = 'tpu'"]
    with pytest.raises(SettingsError) as info:  # the gate's agent: a network's, checked now, not after a round
        R.check_profile(
            P.apply_overrides(profile, ["train.gate_agent=polcy", "analysis.calibration_agents=[net-mcts]"])
        )
    assert info.value.problems == [
        "train.gate_agent: agent 'polcy': not a known agent; did you mean policy?",
        "analysis.calibration_agents = ['net-mcts']: ['net-mcts'] are not among the agents",
    ]
    with pytest.raises(SettingsError, match=r"gate_agent = 'greedy': the gate plays each network as one agent"):
        R.check_profile(P.apply_overrides(profile, ["train.gate_agent=greedy"]), devices=False)
    named = ["train.gate_agent=net-gumbel-8", "analysis.agents=[policy@small, net-mcts]"]  # net-mcts: net-mcts-100
    R.check_profile(P.apply_overrides(profile, [*named, "analysis.calibration_agents=[net-mcts-100, policy]"]))
    texts = P.apply_overrides(profile, ["train.init=2024-01-01", "analysis.checkpoint=yes", "train.steps=5"])
    got = (texts["train"]["init"], texts["analysis"]["checkpoint"], texts["train"]["steps"])
    assert got == ("2024-01-01", "yes", 5)  # YAML would give a date and true; a number stays a number


def test_bf16_on_a_cpu_that_would_emulate_it_is_refused_before_anything_runs(monkeypatch):
    """cpu64 asks bf16 of the CPU: fast with AMX, 12.8 times slower than float32 where torch emulates it."""
    cpu64 = P.load_profile("cpu64")  # its training and self-play on the CPU
    for probe in ("_is_amx_tile_supported", "_is_avx512_bf16_supported"):
        monkeypatch.setattr(torch.cpu, probe, lambda: False)
    with pytest.raises(SettingsError) as info:
        R.check_profile(cpu64)
    asked = [p.split(" on the CPU: ")[0] for p in info.value.problems]
    assert asked == ["train.cpu_bf16 = True", "next_round.dtype = 'bfloat16'"], info.value
    assert all("no bf16 instructions" in p and "; set it to " in p for p in info.value.problems)
    R.check_profile(P.apply_overrides(cpu64, ["train.cpu_bf16=false", "next_round.dtype=float32"]))
    R.check_profile(P.load_profile("cpu"))  # float32 throughout
    R.check_profile(cpu64, devices=False)  # the machine is not asked
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)
    R.check_profile(cpu64)  # an AMX CPU runs it as asked


def test_overrides_are_typed_and_dotted():
    profile = P.apply_overrides({"name": "x"}, ["train.steps=500", "02_train.lr=1e-3", "analysis.levels=[0, 4]"])
    assert profile == {"name": "x", "train": {"steps": 500, "lr": 0.001}, "analysis": {"levels": [0, 4]}}
    assert P.apply_overrides(profile, ["name=demo"])["name"] == "demo"
    for bad, why in (
        ("steps=5", "expected SECTION.PARAMETER=VALUE"),
        ("train.=5", "expected SECTION.PARAMETER=VALUE"),
        ("train.steps", "expected KEY=VALUE"),
        ("nosuch.steps=1", "unknown profile section 'nosuch'"),
    ):
        with pytest.raises(ValueError, match=why):
            P.apply_overrides(profile, [bad])


def test_notebook_settings_name_every_bad_parameter():
    namespace = {"games": "8", "levels": [0, 30], "rollout_policy": "smart", "target_power": float("nan"), "np": np}
    with pytest.raises(SettingsError) as info:
        R.notebook_settings("01_round0_data", namespace)
    text = str(info.value)
    assert all(f"{name} =" in text for name in ("games", "levels", "rollout_policy", "target_power")), text
    params = R.notebook_settings("01_round0_data", {"games": 8, "simulations": 4, "stall_limit": None})
    assert (
        params.selfplay.games == 8 and params.selfplay.search.simulations == 4 and params.selfplay.stall_limit is None
    )


def test_plan_runs_the_alphazero_loop(tmp_path):
    steps = P.plan(P.load_profile("ci"), tmp_path, rounds=3)
    assert [(s.notebook, s.round) for s in steps] == [
        ("01_round0_data", 0),
        ("02_train", 0),
        ("03_analysis", 0),
        ("04_next_round", 1),
        ("02_train", 1),
        ("03_analysis", 1),
        ("04_next_round", 2),
        ("02_train", 2),
        ("03_analysis", 2),
    ]
    train2 = steps[7]
    assert train2.parameters["data"] == [str(tmp_path / f"round{k}" / "examples") for k in range(3)]
    assert train2.parameters["value_data"] == [str(tmp_path / "value_games" / "examples")]  # the same every round
    assert train2.output == tmp_path / "notebooks" / "02_train-round2.ipynb"
    assert train2.products[2] == tmp_path / "train2" / "gate.json"  # a round is done once gated ...
    assert train2.products[3] == tmp_path / "train2" / "values" / "checkpoints" / "latest.pt"  # ... and refitted
    assert steps[0].products == (tmp_path / "round0" / "examples", tmp_path / "value_games" / "examples")
    assert all(s.parameters["run_dir"] == str(tmp_path) for s in steps)
    # 04's network is the best so far, known only once the rounds before are gated
    assert steps[6].parameters["network"] == P.LATER
    (tmp_path / "train0").mkdir()
    (tmp_path / "train0" / "gate.json").write_text(json.dumps({"promoted": True}))
    (tmp_path / "train1").mkdir()
    (tmp_path / "train1" / "gate.json").write_text(json.dumps({"promoted": False}))
    assert P.resolved(steps[6]).parameters["network"] == str(tmp_path / "train0" / "checkpoints" / "latest.pt")
    *_, last = P.plan(P.load_profile("ci"), tmp_path, rounds=2, baselines=True)
    assert last.notebook == "05_baselines" and last.output == tmp_path / "notebooks" / "05_baselines.ipynb"
    assert P.resolved(last).parameters["checkpoint"] == str(tmp_path / "train0" / "checkpoints" / "latest.pt")
    # a network given in the profile: a path from where the pipeline starts, or a shipped network's name
    shipped = P.apply_overrides(P.load_profile("ci"), ["analysis.checkpoint=small"])
    analysis = P.plan(shipped, tmp_path)[2]
    assert analysis.parameters["checkpoint"] == str((ROOT / "data" / "networks" / "small.pt").resolve())
    typo = P.apply_overrides(P.load_profile("ci"), ["analysis.checkpoint=smal"])
    with pytest.raises(FileNotFoundError, match=r"'smal': no such file here \(.*smal\), and no shipped network"):
        P.plan(typo, tmp_path)


def test_values_refits_need_the_value_games(tmp_path):
    profile = R.apply_overrides(P.load_profile("ci"), ["round0_data.value_games=0"])
    with pytest.raises(SettingsError, match=r"train.value_steps = 60: needs value_data \(01's value_games"):
        R.check_profile(profile)
    without = R.apply_overrides(profile, ["train.value_steps=0"])
    R.check_profile(without)
    first, train0 = P.plan(without, tmp_path)[:2]
    assert first.products == (tmp_path / "round0" / "examples",) and train0.parameters["value_data"] == []
    same_seed = R.apply_overrides(P.load_profile("ci"), ["round0_data.value_seed=0"])
    with pytest.raises(SettingsError, match="value_seed = 0: the round-0 games' seed"):
        R.check_profile(same_seed)


def test_an_analysis_of_a_network_replaced_since_is_not_done(tmp_path):
    """03 is done only while its arena is newer than the round's network: turning the values refit on
    in a run whose 03 finished makes round 0's network the refit, and 03 plays it again."""
    analysis = next(s for s in P.plan(P.load_profile("ci"), tmp_path) if s.notebook == "03_analysis")
    trained = tmp_path / "train0" / "checkpoints" / "latest.pt"
    trained.parent.mkdir(parents=True)
    trained.write_bytes(b"weights")
    analysis.output.parent.mkdir()
    nbformat.write(
        nbformat.v4.new_notebook(metadata={"papermill": {"end_time": "now", "exception": None}}), analysis.output
    )
    arena = tmp_path / "analysis0" / "arena.csv"
    arena.parent.mkdir()
    arena.write_text("agent,wins\n")
    os.utime(trained, (1e9, 1e9))
    os.utime(arena, (2e9, 2e9))
    assert P.step_done(analysis)
    refit = tmp_path / "train0" / "values" / "checkpoints" / "latest.pt"
    refit.parent.mkdir(parents=True)
    refit.write_bytes(b"refitted weights")
    os.utime(refit, (3e9, 3e9))
    assert P.step_problem(analysis) == (
        f"round 0's network train0/values/checkpoints/latest.pt is newer than its arena {arena}"
    )
    # with 03's record of the weights it played (network.json), those decide, not file times (a copied run)
    record_network(arena.parent, refit)
    os.utime(refit, (3e9, 3e9))
    assert P.step_done(analysis)
    refit.write_bytes(b"weights refitted again")
    os.utime(refit, (1e9, 1e9))  # older than the arena, but other weights
    assert P.step_problem(analysis) == (
        f"its arena {arena} is of other weights than round 0's network train0/values/checkpoints/latest.pt"
    )


def test_a_round_whose_training_went_on_after_its_refit_is_not_done(tmp_path):
    train = next(s for s in P.plan(P.load_profile("ci"), tmp_path) if s.notebook == "02_train")
    train.output.parent.mkdir()
    nbformat.write(
        nbformat.v4.new_notebook(metadata={"papermill": {"end_time": "now", "exception": None}}), train.output
    )
    for path in train.products:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}" if path.suffix == ".json" else "weights")
    refit, trained = refit_checkpoint(tmp_path, 0), trained_checkpoint(tmp_path, 0)
    os.utime(refit, (2e9, 2e9))
    os.utime(trained, (1e9, 1e9))
    assert P.step_done(train)
    os.utime(trained, (3e9, 3e9))  # 02 run again with more steps, stopped before its refit
    assert (
        P.step_problem(train)
        == "its values refit train0/values/checkpoints/latest.pt is of other weights than its training's network "
        "(or older, from before its record)"
    )


def test_a_replay_window_and_warm_starts(tmp_path):
    profile = R.apply_overrides(
        P.load_profile("ci"), ["train.replay_rounds=2", "train.warm_start=true", "train.warm_steps=7"]
    )
    steps = [s for s in P.plan(profile, tmp_path, rounds=4) if s.notebook == "02_train"]
    data = [[Path(d).parent.name for d in s.parameters["data"]] for s in steps]
    assert data == [["round0"], ["round0", "round1"], ["round0", "round1", "round2"], ["round0", "round2", "round3"]]
    assert [s.parameters["init"] for s in steps] == [None, P.LATER, P.LATER, P.LATER]
    assert [s.parameters["steps"] for s in steps] == [profile["train"]["steps"], 7, 7, 7]


def test_sample_data_is_valid_and_made_by_the_kit_as_it_is_now():
    from drmario.play.selfplay import SelfPlayConfig

    selfplay = json.loads((DATA / "round0-sample" / "selfplay.json").read_text())
    # every setting as today's kit writes it: a sample from older code (no preview pill, which the
    # default 24-plane network of 02 needs) fails here until `make data` remakes it
    assert selfplay == SelfPlayConfig.from_dict(P.SAMPLE_SELFPLAY).to_dict()
    total = 0
    for shard in sorted((DATA / "round0-sample" / "examples").glob("*.jsonl.gz")):
        examples, report = read_examples(shard)
        assert report.skipped == 0
        assert all(e.preview is not None for e in examples)
        total += len(examples)
    assert 200 <= total <= 1000
    sample = DATA / "round0-sample"
    assert sum(f.stat().st_size for f in sample.rglob("*") if f.is_file() and ".cache" not in f.name) < 2_000_000
    # every clone and wheel carries the shipped networks (small: 0.4 MB, apprentice: 12 MB)
    assert sum(f.stat().st_size for f in (DATA / "networks").glob("*.pt")) < 16_000_000


def test_the_committed_sample_is_what_make_data_makes_now(tmp_path):
    """`make data` again gives the committed sample game for game and example for example (only the
    games' timings differ): an engine or expert change that alters the sample fails here until it is remade."""
    import gzip

    made = P.make_sample_data(tmp_path, progress=False)

    def games(sample: Path) -> list[dict]:
        rows = [json.loads(line) for line in (sample / "records" / "shard-000000.jsonl").read_text().splitlines()]
        return [{k: v for k, v in row.items() if k != "meta"} for row in rows]

    def examples(sample: Path) -> list[str]:
        with gzip.open(sample / "examples" / "shard-000000.jsonl.gz", "rt") as f:
            return f.read().splitlines()

    committed = DATA / "round0-sample"
    assert games(made) == games(committed)
    assert examples(made) == examples(committed)


# ------------------------------------------------------------------------------------------------
# The command line


def test_train_command(tmp_path, capsys):
    run = tmp_path / "run"
    args = ["train", str(run), str(DATA / "round0-sample" / "examples"), "--no-progress", "--threads", "1"]
    settings = ["steps=4", "batch_size=16", "net.filters=4", "net.blocks=0", "log_every=2", "eval_every=4"]
    assert main(args + [x for s in settings for x in ("--set", s)]) == 0
    assert "on_error='raise': 0 examples dropped" in capsys.readouterr().out  # what was read, without the bar
    result = json.loads((run / "train_result.json").read_text())
    assert result["step"] == 4 and result["stopped"] is None
    load_player(result["checkpoint"]).evaluate(np.zeros((1, 8, 16), np.uint8), np.ones((1, 2), np.uint8))
    assert main(args + ["--set", "optimizr=sgd"]) == 2
    assert "--set optimizr: not a setting; did you mean optimizer?" in capsys.readouterr().err  # once
    assert main(args + ["--steps", "-1", "--lr", "nan"]) == 2
    err = capsys.readouterr().err
    assert "steps = -1" in err and "lr = 'nan'" in err


def test_train_command_fails_when_training_stops(tmp_path, capsys):
    settings = [
        "steps=20",
        "batch_size=16",
        "net.filters=4",
        "net.blocks=0",
        "net.head=design",
        "lr=10",
        "optimizer=sgd",
    ]
    args = ["train", str(tmp_path), str(DATA / "round0-sample" / "examples"), "--no-progress", "--threads", "1"]
    assert main(args + [x for s in settings for x in ("--set", s)]) == 3
    assert "non-finite loss" in capsys.readouterr().err
    assert json.loads((tmp_path / "train_result.json").read_text())["stopped"]


# ------------------------------------------------------------------------------------------------
# The whole chain with the CI profile


@pytest.fixture(scope="module")
def chain(tmp_path_factory) -> Path:
    """The CI profile's whole chain, run from outside the checkout (with the checkout's interpreter,
    whose compiled kernels the other tests share; the wheel's own run is the test above)."""
    work = tmp_path_factory.mktemp("pipeline")
    cmd = [sys.executable, "-m", "drmario", "pipeline", "--profile", "ci", "--run-dir", "ci", "--rounds", "2"]
    cmd += ["--baselines", "--no-progress"]
    env = P.child_env() | {"PYTHONWARNINGS": "default"}  # deprecations in the package's code print too
    done = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return work / "ci"


@pytest.mark.slow
def test_chain_leaves_examples_a_network_and_an_arena(chain):
    books = sorted((chain / "notebooks").glob("*.ipynb"))
    assert [p.name for p in books] == sorted(
        ["01_round0_data.ipynb", "02_train.ipynb", "03_analysis.ipynb"]
        + ["04_next_round-round1.ipynb", "02_train-round1.ipynb", "03_analysis-round1.ipynb"]
        + ["05_baselines.ipynb"]
    )
    for path in books:
        executed_without_errors(path)
    for k in (0, 1):
        for shard in sorted((chain / f"round{k}" / "examples").glob("*.jsonl.gz")):
            _, report = read_examples(shard)  # validates every line
            assert report.skipped == 0 and report.examples > 0
        player = load_player(chain / f"train{k}" / "checkpoints" / "latest.pt")
        pred = player.evaluate(np.zeros((2, 8, 16), np.uint8), np.ones((2, 2), np.uint8))
        assert np.isfinite(pred.won).all() and np.allclose(pred.moves.sum(axis=(1, 2, 3)), 1, atol=1e-4)
        arena = pd.read_csv(chain / f"analysis{k}" / "arena.csv")
        agents, levels = CI["analysis"]["agents"], CI["analysis"]["levels"]
        assert set(arena["agent"]) == set(agents) and len(arena) == len(agents) * len(levels)
    metrics = pd.read_csv(chain / "train1" / "metrics.csv")
    assert {"train", "test"} <= set(metrics["split"]) and np.isfinite(metrics["loss"]).all()
    config = json.loads((chain / "train1" / "config.json").read_text())
    assert config["data"] == [str(chain / f"round{k}" / "examples") for k in (0, 1)]  # every round's data
    assert len(load_examples(config["data"], progress=False)) > 0
    # each round's values refitted on the value games, with the moves output the training's; the refit is the
    # round's network (round 1 plays with round 0's)
    values = json.loads((chain / "value_games" / "selfplay.json").read_text())
    assert (values["games"], values["seed"]) == (CI["round0_data"]["value_games"], 1000)
    positions = load_examples(chain / "round0" / "examples", progress=False).subset(np.arange(40))
    for k in (0, 1):
        refit = json.loads((chain / f"train{k}" / "values" / "config.json").read_text())
        assert refit["learn"] == "values" and refit["data"] == [str(chain / "value_games" / "examples")]
        assert refit["init"] == str(chain / f"train{k}" / "checkpoints" / "latest.pt")
        before, after = (
            load_player(chain / f"train{k}" / folder / "latest.pt").evaluate(
                positions.cells, positions.pills, positions.previews
            )
            for folder in ("checkpoints", "values/checkpoints")
        )
        assert np.array_equal(before.moves, after.moves) and not np.array_equal(before.won, after.won)
    assert json.loads((chain / "round1" / "selfplay.json").read_text())["network"].endswith(
        "train0/values/checkpoints/latest.pt"
    )
    baselines = pd.read_csv(chain / "baselines" / "arena.csv")
    assert set(CI["baselines"]["agents"]) == set(baselines["agent"])


def executed_settings(path: Path) -> tuple[str, Any]:
    """An executed notebook's section and the settings it ran with: its parameters cell's defaults
    and the parameters papermill injected, built as the notebook builds them."""
    stem = path.stem.split("-")[0]  # 02_train-round1 -> 02_train
    injected = nbformat.read(path, as_version=4).metadata["papermill"]["parameters"]
    defaults = notebook_defaults(ROOT / "notebooks" / f"{stem}.ipynb")
    section = R.section_of(stem)
    return section, R.build(section, {**defaults, **injected}, devices=False)


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


def config_of(settings: Any, *written: Path) -> None:
    """Each written config is the settings' (the progress bars aside: a notebook draws its own)."""
    want = {k: v for k, v in json.loads(json.dumps(settings.to_dict())).items() if k != "progress"}
    for path in written:
        got = {k: v for k, v in read_json(path).items() if k != "progress"}
        assert got == want, (
            path,
            {k: (got.get(k), want.get(k)) for k in got.keys() | want.keys() if got.get(k) != want.get(k)},
        )


def played_as_set(folder: Path, evaluation: Any, agents: list[str]) -> None:
    """An arena folder holds every agent's games, on the evaluation's levels and counts."""
    arena = pd.read_csv(folder / "arena.csv")
    counts = Counter(spec.level for spec in evaluation.games())
    assert set(arena["level"]) == set(counts) == set(evaluation.levels)
    assert all(row.games == counts[row.level] for row in arena.itertuples()), arena[["agent", "level", "games"]]
    assert {p.stem for p in (folder / "games").glob("*.jsonl")} == set(arena["agent"]) == set(agents)
    for agent in agents:
        assert len((folder / "games" / f"{agent}.jsonl").read_text().splitlines()) == sum(counts.values())


@pytest.mark.slow
def test_every_notebook_did_what_its_settings_say(chain):
    """What each executed notebook wrote is what its settings (its defaults and the pipeline's
    parameters) say: a notebook that dropped a setting, played another round's network or seeds, or
    wrote part of its results would still run, and only this shows it."""
    seen = set()
    for path in sorted((chain / "notebooks").glob("*.ipynb")):
        section, settings = executed_settings(path)
        seen.add(section)
        if section == "round0_data":
            config_of(settings.selfplay, chain / "round0" / "selfplay.json")
            config_of(settings.value_games_config(), chain / "value_games" / "selfplay.json")
            levels = [r.level for r in read_records(chain / "round0")]
            assert len(levels) == settings.selfplay.games and set(levels) == set(settings.selfplay.levels)
        elif section == "train":
            k, train = settings.round, settings.train
            config_of(train, chain / f"train{k}" / "config.json")
            assert train.init == (None if k == 0 else str(checkpoint_path(chain, k - 1)))  # warm-started
            config_of(
                settings.values_refit(chain / f"train{k}" / "checkpoints" / "latest.pt"),
                chain / f"train{k}" / "values" / "config.json",
            )
            assert read_json(chain / f"train{k}" / "train_result.json")["step"] == train.steps > 0
            assert read_json(chain / f"train{k}" / "values" / "train_result.json")["step"] == settings.value_steps > 0
        elif section == "analysis":
            k = settings.round
            network = read_json(chain / f"analysis{k}" / "network.json")
            assert network == {
                "checkpoint": str(checkpoint_path(chain, k).resolve()),
                "sha256": file_sha256(checkpoint_path(chain, k)),
            }
            played_as_set(chain / f"analysis{k}", settings.evaluation, settings.agents)
        elif section == "next_round":
            k, selfplay = settings.round, settings.selfplay
            config_of(settings.selfplay_run(), chain / f"round{k}" / "selfplay.json")
            assert read_json(chain / f"round{k}" / "selfplay.json")["seed"] == selfplay.seed + k  # not round 0's games
            assert selfplay.network == str(checkpoint_path(chain, k - 1))  # the best so far: the only one
            round0 = {(r.seed, r.level) for r in read_records(chain / "round0")}
            assert not round0 & {(r.seed, r.level) for r in read_records(chain / f"round{k}")}
        else:
            config_of(settings.dqn_run(), chain / "baselines" / "dqn" / "config.json")
            config_of(settings.td_run(), chain / "baselines" / "td" / "config.json")
            played_as_set(chain / "baselines", settings.evaluation, settings.agents)
    assert seen == set(R.NOTEBOOKS)


def copy_of_run(chain: Path, run: Path, folders: tuple[str, ...], books: str = "*") -> Path:
    """A new run directory holding the chain's record, these folders and the executed notebooks
    matching `books` (the steps that made them)."""
    (run / "notebooks").mkdir(parents=True)
    shutil.copy2(chain / "pipeline.json", run / "pipeline.json")
    for name in folders:
        shutil.copytree(chain / name, run / name)
    for book in (chain / "notebooks").glob(f"{books}.ipynb"):
        shutil.copy2(book, run / "notebooks" / book.name)
    return run


@pytest.mark.slow
def test_a_training_that_stops_fails_its_round(chain, tmp_path):
    """02 fails when its training stops early (here on a non-finite loss): the pipeline stops there,
    with no gate and the step not done, instead of gating and playing a broken network."""
    run = copy_of_run(chain, tmp_path / "run", ("round0", "value_games"), "01_*")  # 01 done already: the chain's
    settings = ["lr=10", "warmup_steps=0", "optimizer=sgd", "head=design", "value_steps=0", "steps=20"]
    settings += ["filters=4", "blocks=0", "batch_size=16"]  # as test_train_command_fails_when_training_stops
    with pytest.raises(P.PipelineError, match="training stopped early: .*non-finite"):
        P.run_pipeline("ci", run, overrides=[f"train.{s}" for s in settings], stop_before="03", progress=False)
    assert (run / "train0" / "train_result.json").is_file() and not (run / "train0" / "gate.json").exists()
    step = next(s for s in P.plan(P.load_profile("ci"), run) if s.notebook == "02_train")
    assert not P.step_done(step)


@pytest.mark.slow
def test_a_round_its_gate_kept_out_is_not_played_on(chain, tmp_path):
    """When round 1's gate keeps round 0's network, round 2 self-plays with round 0's: 04 plays the
    network the pipeline gives it (the chain cannot show it: there the newest network is the best)."""
    folders = ("round0", "value_games", "train0", "analysis0", "round1", "train1", "analysis1")
    run = copy_of_run(chain, tmp_path / "run", folders)
    gate = run / "train1" / "gate.json"
    gate.write_text(json.dumps({**read_json(gate), "promoted": False}))
    P.run_pipeline("ci", run, rounds=3, stop_before="02", progress=False, log=lambda line: None)
    played = read_json(run / "round2" / "selfplay.json")["network"]
    assert played == str(checkpoint_path(run, 0).resolve()) != str(checkpoint_path(run, 1).resolve())


@pytest.mark.slow
def test_02_run_again_with_more_steps_refits_the_values_again(chain, tmp_path):
    """02 run again with more steps (as a user reruns it in Jupyter): its training goes on past its
    values refit, so the refit, made on weights that are gone, is made again from the new weights
    (the refit learns the value head only: every other weight is the new training's)."""
    run = copy_of_run(chain, tmp_path / "run", ("round0", "value_games", "train0"), "0[12]_*")
    step = next(s for s in P.plan(P.load_profile("ci"), run) if s.notebook == "02_train")
    steps = step.parameters["steps"] + 20
    step = dataclasses.replace(step, parameters={**step.parameters, "steps": steps})
    P._execute(step, ROOT / "notebooks", P.child_env(), progress=False)
    printed = "".join(o.get("text", "") for c in nbformat.read(step.output, 4).cells for o in c.get("outputs", []))
    assert "the training went on after its values refit: refitting again" in printed
    trained, refit = (read_checkpoint(path) for path in (trained_checkpoint(run, 0), refit_checkpoint(run, 0)))
    assert trained["step"] == steps
    value_head = ("pool.", "value_fc.")
    assert [n for n, w in trained["model"].items() if not torch.equal(w, refit["model"][n])]  # it refitted
    for name, weight in trained["model"].items():
        if not name.startswith(value_head):
            assert torch.equal(weight, refit["model"][name]), name


@pytest.mark.slow
def test_chain_resumes_and_refuses_other_settings(chain, capsys):
    stamps = {p: p.stat().st_mtime_ns for p in (chain / "notebooks").glob("*.ipynb")}
    record = (chain / "pipeline.json").read_text()
    lines: list[str] = []
    P.run_pipeline("ci", chain, rounds=2, baselines=True, progress=False, log=lines.append)
    assert all("done already" in line for line in lines) and len(lines) == 7
    assert (chain / "pipeline.json").read_text() == record  # a call that runs nothing leaves the record (its commit)
    assert stamps == {p: p.stat().st_mtime_ns for p in (chain / "notebooks").glob("*.ipynb")}
    with pytest.raises(ValueError, match=r"holds another run \(train\.steps: 200 -> 7\)"):
        P.run_pipeline("ci", chain, overrides=["train.steps=7"], progress=False)
    args = ["pipeline", "--profile", str(ROOT / "params" / "ci.yaml"), "--run-dir", str(chain), "--no-progress"]
    assert main(args + ["--set", "train.steps=7"]) == 2
    assert "holds another run" in capsys.readouterr().err
    # the steps a call leaves out (later rounds, 05) bind as well: a shorter call cannot rewrite them
    with pytest.raises(ValueError, match=r"holds another run \(next_round\.games: \d+ -> 3\)"):
        P.run_pipeline("ci", chain, overrides=["next_round.games=3"], progress=False)
    with pytest.raises(ValueError, match=r"holds another run \(baselines\.td_games: \d+ -> 5\)"):
        P.run_pipeline("ci", chain, rounds=2, overrides=["baselines.td_games=5"], progress=False)


@pytest.mark.slow
def test_05_runs_again_when_the_runs_best_network_changes(chain, tmp_path):
    """05 played the run's best network (its network.json); when a gate changes which one that is
    (more rounds, a round gated again), 05 is no longer done."""
    assert played_network(chain / "baselines")["checkpoint"] == str(best_checkpoint(chain, 2).resolve())
    run = copy_of_run(chain, tmp_path / "run", ("train0", "train1", "baselines"), "05_*")
    record_network(run / "baselines", best_checkpoint(run, 2))  # as if played here
    last = P.plan(P.load_profile("ci"), run, rounds=2, baselines=True)[-1]
    assert P.step_done(last)
    gate = run / "train1" / "gate.json"
    gate.write_text(json.dumps({**read_json(gate), "promoted": not read_json(gate)["promoted"]}))
    assert "did not play the run's best network as it is now" in P.step_problem(last)


@pytest.mark.slow
def test_a_round_whose_network_changed_since_its_gate_is_not_done(chain, tmp_path):
    run = copy_of_run(chain, tmp_path / "run", ("train0",), "02_train")
    step = next(s for s in P.plan(P.load_profile("ci"), run) if s.notebook == "02_train")
    assert P.step_done(step) and len(read_json(run / "train0" / "gate.json")["sha256"]) == 64
    network = checkpoint_path(run, 0)
    network.write_bytes(network.read_bytes())  # the same weights written again: still done
    assert P.step_done(step)
    gate = run / "train0" / "gate.json"
    gate.write_text(json.dumps({**read_json(gate), "sha256": "0" * 64}))  # as if other weights were gated
    assert "judged other weights than train0/" in P.step_problem(step)


def test_a_step_begun_binds_its_settings_as_a_finished_one(tmp_path):
    """An interrupted 01 or 02 resumes from what it wrote (games, checkpoints): other settings then would
    mix two runs in one round, so they are refused as for a finished step, not merely noted."""
    run = tmp_path / "run"

    def rerun(*overrides: str) -> None:
        P.run_pipeline("ci", run, overrides=list(overrides), stop_before="01", progress=False, log=lambda _: None)

    rerun()
    rerun("train.lr=0.01", "round0_data.games=5")  # nothing begun: accepted
    (run / "round0").mkdir()
    (run / "round0" / "selfplay.json").write_text("{}")  # 01 began its games
    with pytest.raises(ValueError, match=r"holds another run \(round0_data\.games: 5 -> 6\)"):
        rerun("train.lr=0.01", "round0_data.games=6")
    (run / "train0" / "checkpoints").mkdir(parents=True)
    (run / "train0" / "checkpoints" / "step-000050.pt").write_bytes(b"")  # 02 began its training
    with pytest.raises(ValueError, match=r"holds another run \(train\.lr: 0\.01 -> 0\.02\)"):
        rerun("train.lr=0.02", "round0_data.games=5")
    rerun("train.lr=0.01", "round0_data.games=5")  # the same settings: resumed
    # what a resumed training may change (its steps, device; the gate, played after it) stays free
    rerun(
        "train.lr=0.01",
        "round0_data.games=5",
        "train.steps=300",
        "train.gate_games_per_level=3",
        "train.value_lr=0.002",
    )
    with pytest.raises(
        ValueError, match=r"holds another run \(train\.value_weight: "
    ):  # the network's, not the refit's
        rerun("train.lr=0.01", "round0_data.games=5", "train.value_weight=0.3")


def test_seeds_a_run_began_with_are_warned_of_not_refused(tmp_path):
    run, lines = tmp_path / "run", []
    P.run_pipeline("ci", run, stop_before="01", progress=False, log=lines.append)
    collide = ["next_round.seed=997"]  # round 3's seed, 1000, is the value games'
    with pytest.raises(SettingsError, match="seed 1000 plays the same games"):
        P.run_pipeline("ci", run, rounds=4, overrides=collide, stop_before="01", progress=False)
    record = read_json(run / "pipeline.json")  # a run made before the check, with those seeds
    record["profile"]["next_round"]["seed"] = 997
    (run / "pipeline.json").write_text(json.dumps(record))
    P.run_pipeline("ci", run, rounds=4, overrides=collide, stop_before="01", progress=False, log=lines.append)
    assert any(line.startswith("warning: profile 'ci': seed 1000 plays the same games") for line in lines)


def test_a_run_stops_before_a_notebook(tmp_path):
    lines: list[str] = []
    steps = P.run_pipeline("ci", tmp_path / "run", stop_before="01", progress=False, log=lines.append)
    assert lines == [f"[1/3] 01_round0_data (round 0): not run (stop before 01); {P.GO_ON}"]
    assert not any(P.step_done(step) for step in steps) and [p.name for p in (tmp_path / "run").iterdir()] == [
        "notebooks",
        "pipeline.json",
    ]
    lines.clear()  # a section's name stands for its notebook
    P.run_pipeline("ci", tmp_path / "run", stop_before="round0_data", progress=False, log=lines.append)
    assert lines == [f"[1/3] 01_round0_data (round 0): not run (stop before 01_round0_data); {P.GO_ON}"]
    with pytest.raises(ValueError, match=r"no step of this run is notebook '04' \(its notebooks: 01_round0_data, "):
        P.run_pipeline("ci", tmp_path / "other", stop_before="04", progress=False)
    with pytest.raises(ValueError, match="no step of this run is notebook ''"):
        P.run_pipeline("ci", tmp_path / "other", stop_before="", progress=False)
    assert not (tmp_path / "other").exists()
    # only the steps before the stop need this machine's devices: gpu-quick's training names cuda
    P.run_pipeline("gpu-quick", tmp_path / "gpu", stop_before="01", progress=False, log=lines.append)
    assert (tmp_path / "gpu" / "pipeline.json").is_file()
