"""The README's short tour runs as written: the first block whole, the second's imports and first
search (its self-play, training and arena take minutes, so they are only parsed); the layout
tables of the README and ARCHITECTURE.md name every module; and its conventions on types hold."""

import ast
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def tour_blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    tour = text[text.index("## A short tour") : text.index("### Conventions")]
    return re.findall(r"```python\n(.*?)```", tour, re.S)


def test_the_tour_runs_as_written():
    first, second = tour_blocks()
    scope: dict = {}
    exec(compile(first, "README tour, block 1", "exec"), scope)
    assert scope["game"].over and scope["record"].moves
    ast.parse(second)  # all of it is Python
    quick = [line for line in second.splitlines() if line.startswith(("from ", "import ", "game =", "result ="))]
    assert len(quick) == 9, quick  # the imports, the new game and its search
    exec(compile("\n".join(quick), "README tour, block 2", "exec"), scope)
    table = scope["result"].table()
    assert table["target"].sum() == 1 and len(table) == len(scope["game"].legal_moves())


def test_the_layout_tables_name_every_module():
    """README's Layout and ARCHITECTURE.md's layers name each module of drmario/ (one was left out)."""
    root = README.parent
    for doc, row_of in ((README, "| `drmario/{}/` |"), (root / "ARCHITECTURE.md", "| `drmario.{}` |")):
        rows = doc.read_text(encoding="utf-8").splitlines()
        for package in sorted(p for p in (root / "drmario").iterdir() if (p / "__init__.py").is_file()):
            row = next((r for r in rows if row_of.format(package.name) in r), None)
            assert row is not None, (doc.name, package.name)
            named = set(re.findall(r"`(\w+)`", row))
            missing = {m.stem for m in package.glob("*.py")} - named - {"__init__"}
            assert not missing, (doc.name, package.name, missing)
    top = {m.stem for m in (root / "drmario").glob("*.py")} - {"__init__", "__main__"}  # the base layer
    readme, architecture = README.read_text(encoding="utf-8"), (root / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert [m for m in top if f"`{m}.py`" not in readme and f"`drmario/{m}.py`" not in readme] == []
    assert [m for m in top if f"`drmario.{m}`" not in architecture] == []


def test_only_the_numba_kernels_go_without_types():
    """The README's convention: a function of the package gives all its types or (a kernel) none;
    mypy refuses the incomplete ones, this test the untyped ones that are not compiled."""
    untyped = []
    for path in sorted((README.parent / "drmario").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            args = node.args
            params = [a for a in args.posonlyargs + args.args + args.kwonlyargs if a.arg not in ("self", "cls")]
            params += [a for a in (args.vararg, args.kwarg) if a is not None]
            typed = node.returns is not None or any(a.annotation is not None for a in params)
            compiled = any("njit" in ast.unparse(d) for d in node.decorator_list)
            if not typed and not compiled:
                untyped.append(f"{path.relative_to(README.parent)}:{node.lineno} {node.name}")
    assert untyped == []
