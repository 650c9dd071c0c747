"""emews in a real notebook (issue 25): an ``.ipynb`` built with nbformat, executed by nbclient on
an ipykernel ``python3`` kernel of this Python, drives ``emews.run`` (a real ``mpiexec`` underneath)
and ``emews.load``; the test reads the executed notebook's outputs as Jupyter would show them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from nbclient import NotebookClient

MODEL = '''
def objective(params):
    """A known bowl: (x - 0.3)^2 + n / 100."""
    return (params["x"] - 0.3) ** 2 + params["n"] / 100
'''

BUDGET = 6

CELLS = [
    f"open('model.py', 'w').write({MODEL!r})",
    "import emews",
    f"""exp = emews.run("model.py:objective", space={{"x": emews.Float(0, 1), "n": emews.Int(1, 9)}},
               optimizer="random", budget={BUDGET}, workers=2, seed=3, exp_dir="exp", task={{"timeout": 120}})""",
    "results = exp.results\nresults",
    "import json\nprint(json.dumps({'rows': len(results), 'dtypes': {c: str(t) for c, t in results.dtypes.items()},"
    " 'objective': results['objective'].tolist(), 'status': results['status'].tolist()}))",
    "print(json.dumps({'best': exp.best(1)[['id', 'objective']].values.tolist()}))",
    "%matplotlib inline\nfigure = exp.plot('trajectory')\nfigure",
]

IN_NOTEBOOK = """import emews
def train(params):
    return params["x"]
emews.run(train, space={"x": emews.Float(0, 1)}, budget=2)"""


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The ``python3`` kernel of this Python: ipykernel's bundled kernelspec when Jupyter finds it
    (nothing run ``ipykernel install``), else one written to a tmp folder on ``JUPYTER_PATH``."""
    try:
        KernelSpecManager().get_kernel_spec("python3")
        return "python3"
    except NoSuchKernel:
        pass
    folder = tmp_path_factory.mktemp("jupyter")
    spec = folder / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python 3",
                "language": "python",
            }
        )
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JUPYTER_PATH", str(folder))
        KernelSpecManager().get_kernel_spec("python3")
    return str(folder)


def execute(cells: list[str], cwd: Path, kernel: str, *, allow_errors: bool = False) -> nbformat.NotebookNode:
    """Run a notebook of ``cells`` in ``cwd`` on the ``python3`` kernel and return it executed."""
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    with pytest.MonkeyPatch.context() as patch:
        if kernel != "python3":
            patch.setenv("JUPYTER_PATH", kernel)
        NotebookClient(
            notebook,
            kernel_name="python3",
            timeout=240,
            allow_errors=allow_errors,
            resources={"metadata": {"path": str(cwd)}},
        ).execute()
    nbformat.validate(notebook)
    return notebook


def text(cell: nbformat.NotebookNode, name: str | None = None) -> str:
    """The stream text a cell printed (``stdout``/``stderr``, or both)."""
    return "".join(
        o["text"] for o in cell.outputs if o["output_type"] == "stream" and (name is None or o["name"] == name)
    )


@pytest.fixture(scope="module")
def executed(kernel: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, nbformat.NotebookNode]:
    cwd = tmp_path_factory.mktemp("notebook")
    return cwd, execute(CELLS, cwd, kernel)


def test_no_cell_raised(executed) -> None:
    _, notebook = executed
    errors = [o for cell in notebook.cells for o in cell.outputs if o["output_type"] == "error"]
    assert errors == []
    assert all(cell.execution_count for cell in notebook.cells)


def test_the_run_cell_shows_the_progress_under_it(executed) -> None:
    cwd, notebook = executed
    shown = text(notebook.cells[2])
    assert f"experiment {cwd / 'exp'}: 2 workers" in shown, shown
    assert f"{BUDGET}/{BUDGET} evaluations: {BUDGET} ok" in shown and "Traceback" not in shown


def test_the_results_cell_has_the_budget_rows_typed(executed) -> None:
    _, notebook = executed
    table = notebook.cells[3].outputs[0]
    assert table["output_type"] == "execute_result" and "text/html" in table["data"]
    told = json.loads(text(notebook.cells[4], "stdout"))
    assert told["rows"] == BUDGET and told["status"] == ["ok"] * BUDGET
    kinds = told["dtypes"]
    assert kinds["id"] == "int64" and kinds["objective"] == "float64"
    assert kinds["p:x"] == "float64" and kinds["p:n"] == "int64" and kinds["finished"].startswith("datetime64[")
    assert kinds["finished"].endswith(", UTC]") and kinds["status"] in ("object", "str", "string")
    best = json.loads(text(notebook.cells[5], "stdout"))["best"]
    assert len(best) == 1 and best[0][1] == min(told["objective"])
    assert told["objective"].index(best[0][1]) == told["objective"].index(min(told["objective"]))


def test_the_plot_cell_renders_a_figure(executed) -> None:
    _, notebook = executed
    images = [o for o in notebook.cells[6].outputs if "image/png" in o.get("data", {})]
    assert len(images) == 1 and len(images[0]["data"]["image/png"]) > 1000


def test_an_objective_defined_in_the_notebook_is_one_clear_message(kernel: str, tmp_path: Path) -> None:
    notebook = execute([IN_NOTEBOOK], tmp_path, kernel, allow_errors=True)
    errors = [o for o in notebook.cells[0].outputs if o["output_type"] == "error"]
    assert len(errors) == 1 and errors[0]["ename"] == "ConfigError"
    assert (
        "emews.run: objective: the function train is defined in a notebook or an interactive session"
        in errors[0]["evalue"]
    ), errors[0]["evalue"]
    assert "%%writefile model.py" in errors[0]["evalue"] and "objective='model.py:train'" in errors[0]["evalue"]
    assert not (tmp_path / "exp").exists() and not (tmp_path / "experiments").exists()
