"""Entry points take a request, their options and one run context, not a row of keywords: no
public function of the packages in :data:`SCOPE` has more than :data:`MOST` parameters
(positional and keyword-only, less ``self``/``cls``; ``*args``/``**kwargs`` not counted), nor
of the app's state (:data:`APP_SCOPE`), which hands the pages' choices to them."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MOST = 8
# the packages held to it so far (folders or modules of landscape/, relative to the root)
SCOPE = ("landscape/experiments", "landscape/matching", "landscape/optim.py",
         "landscape/models/runs.py", "landscape/sources", "landscape/models/importers")
# the app's functions between the pages and those entry points
APP_SCOPE = ("app/state",)


def wide(source: str, most: int = MOST) -> list[tuple[str, int]]:
    """The public functions and methods of public classes of ``source`` with more than
    ``most`` parameters: (qualified name, count)."""
    found = []

    def visit(node: ast.AST, prefix: str) -> None:
        for n in ast.iter_child_nodes(node):
            if isinstance(n, ast.ClassDef) and not n.name.startswith("_"):
                visit(n, f"{prefix}{n.name}.")
            elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
                if n.name.startswith("_"):
                    continue
                a = n.args
                names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
                if prefix and names and names[0] in ("self", "cls"):
                    names = names[1:]
                if len(names) > most:
                    found.append((prefix + n.name, len(names)))

    visit(ast.parse(source), "")
    return found


def _files(scope: tuple[str, ...]) -> list[Path]:
    out = []
    for where in scope:
        path = ROOT / where
        out += sorted(path.rglob("*.py")) if path.is_dir() else [path.with_suffix(".py")]
    return out


def _wide_in(scope: tuple[str, ...]) -> dict[str, int]:
    files = _files(scope)
    assert files, "the scope names nothing"
    return {f"{f.relative_to(ROOT)}:{name}": n
            for f in files for name, n in wide(f.read_text(encoding="utf-8"))}  # fmt: skip


def test_no_public_function_in_scope_has_more_than_eight_parameters() -> None:
    assert _wide_in(SCOPE) == {}


def test_no_public_function_of_the_apps_state_has_more_than_eight_parameters() -> None:
    assert _wide_in(APP_SCOPE) == {}


def test_a_wide_function_is_caught() -> None:
    assert wide("def f(a, b, c, d, e, f, g, h, *, i):\n    pass\n") == [("f", 9)]
    assert wide("class C:\n    def m(self, a, b, c, d, e, f, g, h, i):\n        pass\n") == [
        ("C.m", 9)]  # fmt: skip
    assert wide("class C:\n    def m(self, a, b, c, d, e, f, g, h):\n        pass\n") == []
    assert wide("def g(a, *args, b, **kwargs):\n    pass\n", most=2) == []
    assert wide("def _private(a, b, c, d, e, f, g, h, i):\n    pass\n") == []
