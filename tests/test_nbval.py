"""nbval: every notebook of the chain runs on its own, with its default parameters. A file of its
own, so that `make test` can run it last, once the other tests have compiled the kernels."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from drmario.run import pipeline as P
from drmario.run import profiles as R

ROOT = Path(__file__).resolve().parent.parent
CHAIN = [ROOT / "notebooks" / f"{nb.stem}.ipynb" for nb in R.NOTEBOOKS.values()]
DATA = ROOT / "data"


@pytest.mark.slow
def test_notebooks_run_on_their_own_with_nbval(tmp_path):
    """A copy of the checkout's notebooks and data, so the defaults (../data, ../runs) resolve inside
    tmp_path; nbval runs them in order: 01, 02, then 03 and 04 on 02's network."""
    (tmp_path / "notebooks").mkdir()
    for path in CHAIN:
        shutil.copy(path, tmp_path / "notebooks" / path.name)
    shutil.copytree(DATA, tmp_path / "data", ignore=shutil.ignore_patterns("*.cache.npz"))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax", "--nbval-current-env"]
    cmd += ["--nbval-cell-timeout", "600", "notebooks"]
    done = subprocess.run(cmd, cwd=tmp_path, env=P.child_env(), capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert (tmp_path / "runs" / "notebooks" / "round1" / "examples").is_dir()
