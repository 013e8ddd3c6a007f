import hashlib
import json
from pathlib import Path

import pytest
import torch

DATA = Path(__file__).parent / "data"
VECTORS = DATA / "vectors"
PACKAGE = Path(__file__).resolve().parent.parent / "drmario"
SOURCES_STAMP = PACKAGE / "__pycache__" / "sources.sha256"


def pytest_configure(config: pytest.Config) -> None:
    """Drop numba's cached kernels when the package's sources changed since the last run. numba
    checks a cached kernel against its own file only: a kernel that calls one in another file (or
    reads a constant from it) keeps its compiled copy, so after `search.tree.backup` was changed the
    searches in `search.network` still ran the old one, and the tests passed on code that was gone."""
    if hasattr(config, "workerinput"):  # an xdist worker: the controller has done it
        return
    digest = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        digest.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0" + path.read_bytes())
    stamp = digest.hexdigest()
    if SOURCES_STAMP.is_file() and SOURCES_STAMP.read_text() == stamp:
        return
    for cached in [*PACKAGE.rglob("*.nbi"), *PACKAGE.rglob("*.nbc")]:
        cached.unlink(missing_ok=True)
    SOURCES_STAMP.parent.mkdir(exist_ok=True)
    SOURCES_STAMP.write_text(stamp)


def read_jsonl(path: Path) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="session")
def level_vectors() -> list[dict]:
    return read_jsonl(VECTORS / "levels.jsonl")


@pytest.fixture(scope="session")
def placement_vectors() -> list[dict]:
    return read_jsonl(VECTORS / "placements.jsonl")


@pytest.fixture(scope="session")
def reachable_vectors() -> list[dict]:
    return read_jsonl(VECTORS / "reachable.jsonl")


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny networks gain nothing from threads, and on a busy 2-core machine OpenMP threads spin."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
