"""No function of the engine (``emews/runtime/``) above cyclomatic complexity 15 (issue 29).

    python -m pytest -q tests/runtime/test_runtime_complexity.py

Complexity is counted on Python's ``ast`` the way mccabe (flake8's C901) counts it: one, plus
one per ``if``/``elif``, ``for``, ``while``, ``except`` clause and ``try`` statement; a function
defined inside another counts in it (one, plus its own branches). Boolean operators, conditional
expressions and comprehensions do not count. Two additions make it never lower than mccabe's nor
ruff's C901: the branches inside a ``finally`` block count (mccabe skips them, ruff does not),
and so does each ``case`` of a ``match`` (as ruff counts them).
"""

from __future__ import annotations

import ast
import textwrap

from testutil import REPO

LIMIT = 15
RUNTIME = REPO / "emews" / "runtime"
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def branches(nodes: list[ast.stmt]) -> int:
    """Decision points in these statements, nested blocks and inner functions included."""
    count = 0
    for node in nodes:
        if isinstance(node, (ast.If, ast.For, ast.AsyncFor, ast.While)):
            count += 1 + branches(node.body) + branches(node.orelse)
        elif isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            count += 1 + len(node.handlers) + branches(node.body) + branches(node.orelse) \
                + branches(node.finalbody) + sum(branches(h.body) for h in node.handlers)
        elif isinstance(node, ast.Match):
            count += len(node.cases) + sum(branches(c.body) for c in node.cases)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            count += branches(node.body)
        elif isinstance(node, _FUNCTIONS):
            count += complexity(node)
        elif isinstance(node, ast.ClassDef):
            count += branches(node.body)
    return count


def complexity(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    return 1 + branches(function.body)


def functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """The module's functions and the methods of its classes (not those nested in a function)."""
    found = []

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, _FUNCTIONS):
                found.append((prefix + node.name, node))
            elif isinstance(node, ast.ClassDef):
                walk(node.body, f"{prefix}{node.name}.")

    walk(tree.body, "")
    return found


def measure(source: str) -> dict[str, int]:
    return {name: complexity(node) for name, node in functions(ast.parse(textwrap.dedent(source)))}


def test_the_count_is_mccabes_on_its_reference_functions() -> None:
    assert measure("""
        def flat(n):
            return n + 4

        def chain(n):
            if n > 3:
                return 1
            elif n > 4:
                return 2
            else:
                return 3

        def loop_else(items):
            for i in items:
                print(i)
            else:
                print(None)

        def closures():
            def b():
                def c():
                    pass
                c()
            b()

        def handlers():
            try:
                print(1)
            except TypeError:
                print(2)
            except ValueError:
                print(3)
            else:
                print(4)

        def cleanup(x):
            try:
                return x()
            finally:
                if x:
                    print(x)

        def conditions(a, b):
            with open(a) as f:
                return [x for x in f if x and b] or None

        class Holder:
            def method(self, x):
                while x:
                    x -= 1
    """) == {"flat": 1, "chain": 3, "loop_else": 2, "closures": 3, "handlers": 4, "cleanup": 3,
             "conditions": 1,
             "Holder.method": 2}


def runtime_functions() -> list[tuple[str, int]]:
    out = []
    for path in sorted(RUNTIME.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        rel = path.relative_to(REPO)
        out += [(f"{rel}:{node.lineno} {name}", complexity(node)) for name, node in functions(tree)]
    return out


def test_no_runtime_function_is_above_the_limit() -> None:
    measured = runtime_functions()
    assert len(measured) > 100  # the engine was found
    over = [f"{where}: {value}" for where, value in measured if value > LIMIT]
    assert not over, f"cyclomatic complexity above {LIMIT} in emews/runtime/ (split these):\n" + "\n".join(over)

