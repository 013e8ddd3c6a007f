import json
from pathlib import Path

import pytest
import torch

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
def one_thread():
    """Tiny networks gain nothing from threads, and on a busy 2-core machine OpenMP threads spin."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files with slow tests (the pipeline runs, minutes each) first. `make test` hands out a file at
    a time in this order (--dist loadfile --no-loadscope-reorder), so the longest work starts first
    and the short files fill in beside it, rather than a pipeline run starting last on its own."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)  # stable: the order within and among files stays
