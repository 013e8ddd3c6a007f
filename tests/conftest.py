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


# The files of the pipeline runs, minutes each: the chain starts first, beside the unit tests
# (between them they compile the kernels once); the other runs come last, on compiled kernels (the
# wheel's round copies them). Started together at the outset, two cold runs compiled every kernel twice.
FIRST = ("test_notebooks.py",)
LAST = ("test_robustness.py", "test_wheel.py", "test_nbval.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`make test` hands out a file at a time in collection order (--dist loadfile
    --no-loadscope-reorder): this order (FIRST, the rest, LAST)."""
    rank = {name: 0 for name in FIRST} | {name: 2 + k for k, name in enumerate(LAST)}
    items.sort(key=lambda item: rank.get(item.path.name, 1))  # stable: the order within files stays
