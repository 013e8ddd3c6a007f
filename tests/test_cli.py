"""The command line (drmario.run.cli) as a new user meets it: the command list, torch loaded only
where a network runs, misspelt agents, Ctrl-C, the threads of torch, notebook values in
``settings``, and an evaluation reused from its --out file."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import torch
from helpers import ctrl_c_as_in_a_terminal

from drmario.engine.timing import input_path, read_input_path
from drmario.play.arena import EvalConfig
from drmario.run import cli
from drmario.run import profiles as R
from drmario.run.agents import network_name
from drmario.run.cli import main
from drmario.settings import Settings, SettingsError, setting

ROOT = Path(__file__).resolve().parents[1]
EVAL = ["--levels", "[0]", "--games-per-level", "2", "--top-level-games", "2", "--max-pills", "30", "--no-progress"]


def test_the_command_list_has_a_whole_sentence_for_each_command(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    for name, (_, summary, _) in cli.COMMANDS.items():
        assert summary.endswith(".") and len(summary) <= 80, name
        assert f"{name} {summary}" in text


def test_help_settings_and_a_misspelt_agent_do_not_import_torch():
    code = (
        "import sys\n"
        "from drmario.run.cli import main\n"
        "for argv in (['--help'], ['evaluate', '--help'], ['settings', 'SearchConfig'], "
        "['evaluate', '--agents', 'polcy@small'], ['play', '--agent', 'net-mcst-8']):\n"
        "    try:\n"
        "        print(argv[0], main(argv))\n"
        "    except SystemExit as e:\n"
        "        print(argv[0], e.code)\n"
        "print('torch loaded:', 'torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "torch loaded: False" in done.stdout
    assert "did you mean policy@small?" in done.stderr and "did you mean net-mcts-8?" in done.stderr
    assert done.stdout.count("evaluate 2") == 1 and "play 2" in done.stdout  # bad agents: exit status 2


def test_a_misspelt_agent_is_named_with_the_closest_one(capsys):
    assert main(["evaluate", "--agents", "random,grredy", *EVAL]) == 2
    err = capsys.readouterr().err
    assert "agent 'grredy': not a known agent; did you mean greedy?" in err and "random" not in err
    assert main(["evaluate", "--agents", "zzzzzz", *EVAL]) == 2
    assert "an agent is KIND" in capsys.readouterr().err  # nothing close: the agents' grammar


def test_ctrl_c_ends_in_one_line_and_status_130(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    class HalfBuilt:  # as llvmlite's objects that an interrupted numba compile leaves
        def __del__(self):
            raise AttributeError("_as_parameter_")

    unheard: list = []
    monkeypatch.setattr(sys, "unraisablehook", unheard.append)  # main quiets it for the exit; restored after

    for name in ("generate", "evaluate"):
        _, summary, add_args = cli.COMMANDS[name]
        monkeypatch.setitem(cli.COMMANDS, name, (interrupted, summary, add_args))
    assert main(["generate", "somewhere"]) == 130
    HalfBuilt()  # its finalizer fails, unheard
    assert unheard == []
    err = capsys.readouterr().err
    assert err.strip() == "drmario generate: interrupted; run the same command again to resume"
    assert main(["evaluate"]) == 130
    assert capsys.readouterr().err.strip() == "drmario evaluate: interrupted"  # nothing to resume


def test_sigint_to_a_running_command_prints_no_traceback():
    proc = subprocess.Popen(
        [sys.executable, "-m", "drmario", "play", "--agent", "greedy", "-v", "--delay", "0.5", "--max-pills", "200"],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},  # the first line arrives at once, not when a pipe buffer fills
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_as_in_a_terminal,
    )
    try:
        assert proc.stdout is not None and "greedy plays" in proc.stdout.readline()  # main runs
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert "Traceback" not in err and err.strip() == "drmario play: interrupted"


@pytest.fixture
def checkpoint(tmp_path) -> str:
    from drmario.learn.checkpoint import save_net
    from drmario.learn.net import DrMarioNet, NetConfig

    return str(save_net(DrMarioNet(NetConfig(filters=8, blocks=1)), tmp_path / "net.pt"))


def test_threads_are_set_where_a_network_runs(checkpoint, tmp_path):
    assert torch.get_num_threads() == 1  # conftest's
    assert main(["evaluate", "--agents", "random", "--threads", "2", *EVAL]) == 0
    assert torch.get_num_threads() == 1  # no network: torch is left alone
    assert main(["evaluate", "--agents", f"policy@{checkpoint}", "--threads", "2", *EVAL]) == 0
    assert torch.get_num_threads() == 2
    torch.set_num_threads(1)
    assert main(["evaluate", "--agents", f"policy@{checkpoint}", "--threads", "0", *EVAL]) == 0
    assert torch.get_num_threads() == 1  # 0: torch's own setting, untouched
    assert main(["play", "--agent", f"policy@{checkpoint}", "--threads", "2", "--max-pills", "3"]) == 0
    assert torch.get_num_threads() == 2
    parser = cli.build_parser()
    for name in ("play", "generate", "evaluate", "train"):
        args = parser.parse_args([name, "x"] if name in ("generate", "train") else [name])
        assert args.threads == 1, name  # the default: one thread for the kit's small networks


def test_network_agents_keep_their_network_in_the_table(checkpoint, tmp_path, capsys):
    assert network_name("net-mcts-32@small") == "net-mcts-32@small"
    assert network_name("policy", "small") == network_name("policy@small") == "policy@small"
    assert network_name("net-gumbel", "small") == "net-gumbel-100@small"
    assert network_name("greedy", "small") == "greedy" and network_name("policy") == "policy"
    out = tmp_path / "new" / "arena.csv"  # a folder not there yet: made before the games
    agents = f"greedy,policy@{checkpoint},net-mcts-4"
    assert main(["evaluate", "--agents", agents, "--network", checkpoint, *EVAL, "--out", str(out)]) == 0
    names = list(dict.fromkeys(pd.read_csv(out)["agent"]))
    assert names == ["greedy", f"policy@{checkpoint}", f"net-mcts-4@{checkpoint}"]
    assert f"net-mcts-4@{checkpoint}" in capsys.readouterr().out.split("win rate [Wilson 95%]")[1]


def test_evaluate_reuses_its_out_file_when_made_the_same_way(checkpoint, tmp_path, monkeypatch, capsys):
    import drmario.play.arena as arena_module

    out = tmp_path / "arena.csv"
    args = ["evaluate", "--agents", f"greedy,policy@{checkpoint}", *EVAL, "--out", str(out)]
    assert main(args) == 0
    first = capsys.readouterr().out
    record = json.loads((tmp_path / "arena.csv.settings.json").read_text())
    assert record["agents"] == ["greedy", f"policy@{checkpoint}"] and record["evaluation"]["games_per_level"] == 2
    assert record["device"] == "cpu"  # where the network played (auto's dtype: bfloat16 on a GPU)
    played = []
    real = arena_module.arena
    monkeypatch.setattr(arena_module, "arena", lambda *a, **k: played.append(1) or real(*a, **k))
    assert main(args) == 0  # the same agents and settings: printed from the file
    again = capsys.readouterr().out
    assert played == [] and "played before" in again and again.split("\n\n", 1)[1] == first
    assert main([*args, "--force"]) == 0 and played == [1]
    assert main([*args, "--max-pills", "31"]) == 0 and played == [1, 1]  # other settings: played again
    assert "other agents or settings" in capsys.readouterr().err
    assert main([*args, "--max-pills", "31"]) == 0 and played == [1, 1]
    assert main([*args, "--max-pills", "31", "--dtype", "bfloat16"]) == 0 and played == [1, 1, 1]  # another dtype
    assert json.loads((tmp_path / "arena.csv.settings.json").read_text())["dtype"] == "bfloat16"
    assert main([*args, "--max-pills", "31"]) == 0 and played == [1, 1, 1, 1]
    from drmario.learn.checkpoint import save_net
    from drmario.learn.net import DrMarioNet, NetConfig

    save_net(DrMarioNet(NetConfig(filters=4, blocks=1)), checkpoint)  # another network at the same path
    assert main([*args, "--max-pills", "31"]) == 0 and played == [1, 1, 1, 1, 1]


def test_dtype_chooses_the_networks_number_format_in_play(checkpoint):
    from drmario.learn.device import INFERENCE_DTYPES, resolve_dtype
    from drmario.run.agents import DTYPES, make_agent, make_agents

    assert ("auto", *INFERENCE_DTYPES) == DTYPES
    assert resolve_dtype("auto") is None and resolve_dtype("bfloat16") is torch.bfloat16
    with pytest.raises(ValueError, match="'half'.*auto, float32, bfloat16"):
        resolve_dtype("half")
    for name, dtype in [("auto", torch.float32), ("float32", torch.float32), ("bfloat16", torch.bfloat16)]:
        search, alone = make_agents(["net-mcts-4", "policy"], network=checkpoint, dtype=name)
        assert search.evaluator is alone.evaluator and alone.evaluator.dtype == dtype
        assert make_agent(f"policy@{checkpoint}", dtype=name).evaluator.dtype == dtype
    assert main(["play", "--agent", f"net-mcts-2@{checkpoint}", "--dtype", "bfloat16", "--max-pills", "3"]) == 0


def test_settings_of_a_notebook_are_the_notebooks_values(capsys):
    from drmario.learn.train import TrainConfig

    assert main(["settings", "02_train"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for start in (
        "filters (train.net.filters): int = 16",
        "blocks (train.net.blocks): int = 2",
        "optimizer (train.optimizer): 'sgd' | 'adamw' = 'adamw'",
        "lr (train.lr): float = 0.002",
        "steps (train.steps): int = 60",
    ):
        assert any(line.split(" (class default")[0] == start for line in lines), start
    default = TrainConfig().steps
    assert ("steps (train.steps): int = 60" + (f" (class default: {default})" if default != 60 else "")) in lines
    assert main(["settings", "train"]) == 0 and capsys.readouterr().out.splitlines() == lines  # the section's name
    assert main(["settings", "02"]) == 0 and capsys.readouterr().out.splitlines() == lines  # its number
    assert main(["settings", "TrainConfig"]) == 0
    assert f"filters (net.filters): int = {TrainConfig().net.filters}\n" in capsys.readouterr().out  # class defaults
    assert main(["settings", "TrainConfg"]) == 2
    assert "did you mean TrainConfig" in capsys.readouterr().err


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("0*.ipynb")), ids=lambda p: p.stem)
def test_notebook_values_are_what_papermill_reads(path):
    import papermill as pm

    read = {name: ast.literal_eval(p["default"]) for name, p in pm.inspect_notebook(str(path)).items()}
    assert R.notebook_values(path.stem) == read and read


def test_output_into_a_closed_pipe_ends_quietly():
    code = (
        "import os, sys\n"
        "from drmario.run.cli import main\n"
        "r, w = os.pipe()\n"
        "os.close(r)\n"
        "os.dup2(w, 1)\n"  # as `drmario settings ... | head -1` after head has exited
        "print('status', main(['settings', 'SelfPlayConfig']), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0 and done.stderr == "status 141\n", done.stderr


def test_input_paths_read_back_frame_by_frame():
    paths = [
        (),
        ("",),
        ("", "", "", "L", *["D"] * 8),
        ("D", "", "D", "", "D", "", "D", "R", "D", "R", "D", "LAB", "D"),
        ("A", "A", "B", "", "", "RA", "D", "RA", "D", "D"),
    ]
    for inputs in paths:
        assert read_input_path(input_path(inputs)) == list(inputs), inputs
    assert input_path(("", "", "", "L", *["D"] * 8)) == "·×3 L D×8"
    assert input_path(("D", "", "D", "", "D", "", "D", "LA")) == "(D ·)×3 D LA"


def test_play_under_nes_timing_prints_each_pill_s_input_path_and_the_frames(capsys):
    from drmario.engine.game import Game
    from drmario.engine.rules import canonical

    args = ["play", "--agent", "greedy", "--level", "3", "--timing", "nes", "--speed", "hi", "--max-pills", "12"]
    assert main([*args, "-v"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "timing nes at speed hi" in lines[0]
    moves = [line for line in lines if line.startswith("pill ")]
    paths = [line for line in lines if line.startswith("  ") and " frames (speed " in line]
    assert len(moves) == len(paths) == 12
    game = Game(1234, 3, timing="nes", speed="hi")
    for move, path in zip(moves, paths):  # the printed path is the one the game took
        r, x, y = (int(move.split(f"{k}=")[1].split()[0].rstrip(":")) for k in "rxy")
        head, text = path.strip().split(": ", 1)
        frames, speed, parity = int(head.split()[0]), int(head.split("speed ")[1][:-1].split(",")[0]), int(head[-2])
        reach = game.reachable()[canonical(game.pill, (r, x, y))]
        assert (frames, speed, parity) == (reach.frames, game.speed_index, game.parity)
        assert read_input_path(text) == list(reach.inputs) and len(reach.inputs) == frames
        game.play((r, x, y))
    assert lines[-1].startswith(f"{game.frames} frames (") and game.frames > sum(int(p.split()[0]) for p in paths)
    assert main(args) == 0  # without -v: no paths, the frames at the end
    out = capsys.readouterr().out
    assert " frames (speed " not in out and out.splitlines()[-1] == lines[-1]


def test_play_under_free_timing_prints_no_frames_and_a_bad_speed_is_a_clear_error(capsys):
    assert main(["play", "--agent", "greedy", "--level", "3", "-v", "--max-pills", "5"]) == 0
    out = capsys.readouterr().out
    assert "pill    5:" in out and "frames" not in out and "timing" not in out
    for bad in (["--speed", "max"], ["--timing", "snes"]):
        with pytest.raises(SystemExit) as e:
            main(["play", *bad])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert f"invalid choice: '{bad[1]}'" in err and bad[0] in err


def test_a_flag_takes_none_as_its_help_writes_it():
    """The help writes an optional setting as int|None: both None and YAML's null mean None."""
    import argparse

    from drmario.play.selfplay import SelfPlayConfig

    parser = argparse.ArgumentParser()
    cli.add_settings(parser, SelfPlayConfig)
    args = parser.parse_args(["--stall-limit", "None", "--rescue-after", "null", "--games", "3"])
    cfg = cli.settings_from(SelfPlayConfig, args)
    assert (cfg.stall_limit, cfg.rescue_after, cfg.games) == (None, None, 3)
    assert cli.settings_from(SelfPlayConfig, parser.parse_args(["--rescue-after", "12"])).rescue_after == 12


def test_a_true_or_false_flag_alone_means_true():
    import argparse

    from drmario.learn.train import TrainConfig

    parser = argparse.ArgumentParser()
    cli.add_settings(parser, TrainConfig)
    assert cli.settings_from(TrainConfig, parser.parse_args(["--cpu-bf16"])).cpu_bf16 is True
    assert cli.settings_from(TrainConfig, parser.parse_args(["--cpu-bf16", "false"])).cpu_bf16 is False
    assert cli.settings_from(TrainConfig, parser.parse_args(["--augment", "false", "--steps", "5"])).augment is False
    with pytest.raises(SettingsError, match="cpu_bf16 = 'yes please'"):
        cli.settings_from(TrainConfig, parser.parse_args(["--cpu-bf16", "yes please"]))


def test_settings_come_from_the_config_then_the_flags_then_set_later_ones_winning(tmp_path):
    import argparse

    from drmario.play.selfplay import SelfPlayConfig

    config = tmp_path / "selfplay.yaml"
    config.write_text("games: 3\nseed: 9\nlevels: [4]\nsearch:\n  simulations: 12\n")
    flags = {cli.SETTING + "games": 5, cli.SETTING + "search.simulations": 20}  # as the derived flags leave them
    args = argparse.Namespace(config=str(config), set=["games=7"], **flags)
    cfg = cli.settings_from(SelfPlayConfig, args)
    assert (cfg.games, cfg.seed, cfg.levels, cfg.search.simulations) == (7, 9, [4], 20)  # --set > flag > config
    assert cli.settings_from(SelfPlayConfig, argparse.Namespace(config=str(config), set=[])).games == 3
    assert cli.settings_from(SelfPlayConfig, args, games=11).games == 11  # what the command fixes


def test_every_setting_has_its_help():
    """A field declared without `setting(default, doc)` would be a flag and a parameter with no help."""
    for name, cls in cli.settings_classes().items():
        assert [leaf.path for leaf in cls.leaves() if not leaf.doc.strip()] == [], name


@dataclass(frozen=True)
class Outer(Settings):  # (at module level: the settings read their annotations from the module)
    seed: int = setting(0, "the outer seed")
    evaluation: EvalConfig = setting(EvalConfig(), "nested, not prefixed")


def test_a_flat_name_used_twice_is_named_where_the_settings_are_declared():
    """Two leaves flattening to one name, or a leaf whose flag the command already has, would give
    argparse's bare 'conflicting option string' or a notebook parameter read into the wrong setting."""
    import argparse

    with pytest.raises(TypeError, match="Outer: seed and evaluation.seed both flatten to 'seed'"):
        list(Outer.leaves())
    parser = argparse.ArgumentParser(prog="drmario evaluate")
    parser.add_argument("--levels")
    with pytest.raises(TypeError, match="EvalConfig.levels: its flag --levels is already an option of 'drmario eval"):
        cli.add_settings(parser, EvalConfig)


def test_text_settings_are_taken_as_typed_and_a_notebooks_dotted_path_is_pointed_to_its_flat_name():
    import argparse

    from drmario.play.selfplay import SelfPlayConfig

    parser = argparse.ArgumentParser()
    cli.add_settings(parser, SelfPlayConfig)
    args = parser.parse_args(["--network", "2024-01-01", "--device", "yes", "--set", "search.simulations=3"])
    cfg = cli.settings_from(SelfPlayConfig, args)  # YAML would make a date and true of them
    assert (cfg.network, cfg.device, cfg.search.simulations) == ("2024-01-01", "yes", 3)
    assert cli.settings_from(SelfPlayConfig, parser.parse_args(["--set", "network=123"])).network == "123"
    assert cli.settings_from(SelfPlayConfig, parser.parse_args(["--network", "null"])).network is None
    with pytest.raises(SettingsError, match=r"--set evaluation.seed: not a setting; did you mean seed\?$"):
        cli.settings_from(EvalConfig, parser.parse_args(["--set", "evaluation.seed=3"]))  # as `settings 03` has it
    cfg = cli.settings_from(SelfPlayConfig, parser.parse_args(["--set", "network='2024-01-01'", "--set", "device=@x"]))
    assert (cfg.network, cfg.device) == ("2024-01-01", "@x")  # quotes dropped as YAML does; @ is no YAML
    probs = cli.settings_from(SelfPlayConfig, parser.parse_args(["--pill-probs", "0.5,0.5,0,0,0,0,0,0,0"]))
    assert probs.search.pill_probs == (0.5, 0.5, 0, 0, 0, 0, 0, 0, 0)  # a list without brackets, also as X | None


def test_bad_numbers_and_devices_are_named_before_anything_runs(checkpoint, tmp_path, capsys):
    for bad, option in (
        (["play", "--threads", "-1"], "--threads"),
        (["train", str(tmp_path / "t"), "--threads", "-1"], "--threads"),
        (["play", "--max-pills", "0"], "--max-pills"),
        (["play", "--delay", "-1"], "--delay"),
    ):
        with pytest.raises(SystemExit) as e:
            main(bad)
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert f"argument {option}" in err and "or more" in err, bad
    assert main(["play", "--agent", f"policy@{checkpoint}", "--device", "gpu", "--max-pills", "3"]) == 2
    assert "--device gpu: not a torch device (auto, cpu, cuda or cuda:N)" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert main(["evaluate", "--agents", f"policy@{checkpoint}", "--device", "cuda", *EVAL]) == 2
        assert "--device cuda: this machine has no CUDA GPU" in capsys.readouterr().err
    assert main(["play", "--agent", "greedy", "--device", "gpu", "--max-pills", "3"]) == 0  # no network: unused


def test_a_failed_generate_does_not_block_its_corrected_rerun(checkpoint, tmp_path, capsys):
    run = tmp_path / "run"
    args = ["generate", str(run), "--mode", "puct", "--simulations", "2", "--games", "1", "--max-pills", "3"]
    assert main([*args, "--network", str(tmp_path / "missing.pt")]) == 2
    assert "missing.pt': no such file" in capsys.readouterr().err
    assert main([*args, "--network", str(tmp_path)]) == 2
    assert "a directory: give its checkpoint file (.pt)" in capsys.readouterr().err
    assert not (run / "selfplay.json").exists()  # nothing written
    assert main([*args, "--network", checkpoint, "--no-progress"]) == 0
    shipped = ["generate", str(tmp_path / "shipped"), *args[2:], "--network", "small", "--no-progress"]
    assert main(shipped) == 0  # a shipped network's name, as in agent specs
    assert json.loads((tmp_path / "shipped" / "selfplay.json").read_text())["network"].endswith("small.pt")


def test_a_flag_the_settings_never_read_is_named(tmp_path, capsys):
    args = ["generate", str(tmp_path / "run"), "--mode", "expert", "--games", "1", "--max-pills", "3", "--no-progress"]
    assert main([*args, "--simulations", "400", "--set", "c_puct=2"]) == 0  # noted, and run
    assert capsys.readouterr().err.splitlines() == [
        "unread setting, simulations = 400: mode 'expert' does not read it",
        "unread setting, c_puct = 2: mode 'expert' does not read it (mode puct's setting)",
    ]
    assert main(["evaluate", "--agents", "greedy", "--speed", "hi", *EVAL]) == 0
    speed = "unread setting, speed = 'hi': not read with timing = 'free' (the speed is for timing 'nes')"
    assert speed in capsys.readouterr().err
    assert main(["evaluate", "--agents", "greedy", "--speed", "hi", "--timing", "nes", *EVAL]) == 0
    assert "unread" not in capsys.readouterr().err
    assert main(["play", "--agent", "greedy", "--speed", "hi", "--max-pills", "3"]) == 0
    assert capsys.readouterr().err == speed + "\n"
    assert main(["play", "--agent", "greedy", "--timing", "nes", "--max-pills", "3"]) == 0  # speed: med
    assert "unread" not in capsys.readouterr().err


def test_a_key_given_twice_in_a_settings_file_is_named_with_both_lines(tmp_path, capsys):
    config = tmp_path / "eval.yaml"
    config.write_text("games_per_level: 2\nlevels: [0]\nlevels: [4]\n")
    assert main(["evaluate", "--agents", "random", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "the key 'levels' is given twice" in err and "line 2" in err and "line 3" in err


def test_a_list_flag_takes_yaml_or_a_bare_comma_list(capsys):
    parser = cli.build_parser("evaluate")
    for text in ("[0, 10]", "0,10", "0, 10"):
        assert vars(parser.parse_args(["evaluate", "--levels", text]))["setting:levels"] == [0, 10], text
    assert main(["evaluate", "--agents", "random", "--set", "levels=0,10"]) == 2  # --set values are YAML
    assert "levels = '0,10': expected a list (list[int], written [a, b])" in capsys.readouterr().err


def test_a_misspelt_option_is_named_under_its_commands_usage(capsys):
    for argv, said in (
        (["play", "--agnet", "greedy"], "error: unrecognized arguments: --agnet greedy; did you mean --agent?"),
        (["evaluate", "--levels", "0", "10"], "error: unrecognized arguments: 10\n"),
    ):
        with pytest.raises(SystemExit) as e:
            main(argv)
        err = capsys.readouterr().err
        assert e.value.code == 2 and f"drmario {argv[0]}: {said}" in err, err
        assert err.startswith(f"usage: drmario {argv[0]} ")  # the command's usage, not the list of commands
