"""The installed wheel runs a round outside the checkout: the pipeline finds its notebooks,
profiles and shipped data without the source tree. A file of its own, so that `make test` can
run it last, once the other tests have compiled the kernels."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pandas as pd
import pytest
from helpers import TINY, executed_without_errors

ROOT = Path(__file__).resolve().parent.parent


def python_prints(python: str, code: str, **kwargs) -> str:
    """What `python -c code` prints."""
    return subprocess.run([python, "-c", code], check=True, capture_output=True, text=True, **kwargs).stdout.strip()


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> Path:
    """A fresh virtual environment with the kit installed from its wheel (no checkout on its path):
    the pipeline must find its notebooks and profiles without the source tree. Its dependencies
    are this environment's (a .pth line names our site-packages, whose own .pth files, the
    checkout's editable install among them, are not read), so the test spends no minute
    reinstalling torch and Jupyter; `make install` checks the declared dependencies install."""
    base = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(base / "dist"), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    [wheel] = (base / "dist").glob("drmario_kit-*.whl")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    site = python_prints(python, "import sysconfig; print(sysconfig.get_path('purelib'))")
    install = [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", str(wheel)]
    subprocess.run(install, check=True, capture_output=True, timeout=300)
    Path(site, "_drmario_test_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")  # after pip
    copy_compiled_kernels(ROOT / "drmario", Path(site) / "drmario")
    return venv


def copy_compiled_kernels(checkout: Path, installed: Path) -> None:
    """Give the installed package the kernels the checkout's tests compiled so far, which it would
    otherwise compile again for minutes: the source files are the same, and numba keys its cache on
    a file's place (the cache sits in its __pycache__), modification time and size, so the times go
    over too. A kernel not compiled yet is compiled by the wheel's run as on a fresh install."""
    for cached in checkout.rglob("__pycache__/*.nb[ic]"):
        folder = installed / cached.parent.relative_to(checkout)
        if not folder.parent.is_dir():  # a leftover of a module the package no longer has
            continue
        folder.mkdir(exist_ok=True)
        shutil.copy2(cached, folder / cached.name)
    for source in checkout.rglob("*.py"):
        if (twin := installed / source.relative_to(checkout)).is_file():
            os.utime(twin, ns=(source.stat().st_atime_ns, source.stat().st_mtime_ns))


@pytest.mark.slow
def test_the_installed_wheel_runs_a_round_from_outside_the_checkout(wheel_venv, tmp_path):
    """The wheel's pipeline finds its notebooks and profiles without the source tree: a tiny round
    (01 -> 02 -> 03; agents without search, whose kernels a fresh install would compile for minutes)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    python = str(wheel_venv / "bin" / "python")
    where = python_prints(python, "import drmario; print(drmario.__file__)", cwd=tmp_path, env=env)
    assert str(wheel_venv) in where, f"drmario imported from {where} (not the wheel)"
    cmd = [python, "-m", "drmario", "pipeline", "--profile", "ci", "--run-dir", "tiny", "--no-progress"]
    for item in [*TINY, "analysis.agents=[random, greedy, policy]", "analysis.calibration_agents=[policy]"]:
        cmd += ["--set", item]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    books = sorted((tmp_path / "tiny" / "notebooks").glob("*.ipynb"))
    assert [p.name for p in books] == ["01_round0_data.ipynb", "02_train.ipynb", "03_analysis.ipynb"]
    for path in books:
        executed_without_errors(path)
    assert set(pd.read_csv(tmp_path / "tiny" / "analysis0" / "arena.csv")["agent"]) == {"random", "greedy", "policy"}
