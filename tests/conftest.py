import json
import os
from pathlib import Path

import pytest
import torch
from hypothesis import settings

import drmario  # noqa: F401  importing it drops stale cached kernels: here once, before xdist's workers compile

# The property tests draw the same examples on every run (a test run is reproducible, as everything else in the
# kit); HYPOTHESIS_PROFILE=explore draws new ones each run, to look further.
settings.register_profile("fixed", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fixed"))

DATA = Path(__file__).parent / "data"
VECTORS = DATA / "vectors"


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
def torch_state():
    """One thread (tiny networks gain nothing from threads, and on a busy 2-core machine OpenMP threads
    spin), and torch's global random state seeded for each test and restored after it: a network a test
    makes without a seed is then the same whichever tests ran before it on its worker."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        yield
    torch.set_num_threads(threads)
