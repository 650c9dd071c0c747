"""The README's examples run: the custom optimizer passes the conformance kit, the commands match CI.

The Optuna adapter's listing moved to ``docs/optimizers.md``; its test reads it there.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

from testutil import REPO
from emews.core.jsoncodec import dumps_point
from emews.testing import check_optimizer, run_traced

README = (REPO / "README.md").read_text()
OPTIMIZERS_DOC = (REPO / "docs" / "optimizers.md").read_text()


def python_block(containing: str, text: str = README) -> str:
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    return next(b for b in blocks if containing in b)


def readme_local_search(tmp_path: Path) -> Any:
    """The README's ``my_search.py``, imported."""
    source = python_block("class LocalSearch")
    assert len(source.strip().splitlines()) < 40
    path = tmp_path / "my_search.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("my_search", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_custom_optimizer_passes_the_conformance_kit(tmp_path: Path) -> None:
    module = readme_local_search(tmp_path)
    check_optimizer(lambda seed: module.LocalSearch(seed=seed), budget=24, workers=3)


def test_the_readme_optimizer_resumed_with_its_seed_proposes_no_earlier_point_again(tmp_path: Path) -> None:
    """Stopped after 6 of 12 and resumed with seed 3, it drew the first run's first points again
    (ids 0 and 1 came back as 6 and 7): the example now draws on with ``resumed_seed``."""
    module = readme_local_search(tmp_path)
    first = run_traced(lambda seed: module.LocalSearch(seed=seed), seed=3, budget=6, workers=2)
    resumed = run_traced(
        lambda seed: module.LocalSearch(seed=seed), seed=3, budget=12, workers=2, history=first.results
    )
    earlier = [dumps_point(r.params) for r in first.results]
    again = [p for p in resumed.points if dumps_point(p) in earlier]
    assert len(resumed.points) == 6 and again == [], again


def test_ci_runs_the_readme_test_command() -> None:
    command = re.search(r"\*\*Run the whole test suite\*\*.*?```bash\n(.*?)\n```", README, re.S).group(1)
    assert command.strip() in (REPO / ".ci" / "run").read_text()


def test_the_optimizer_docs_show_the_real_optuna_adapter_and_it_conforms() -> None:
    source = (REPO / "emews" / "contrib" / "optuna.py").read_text()
    assert python_block("class OptunaSampler", OPTIMIZERS_DOC) == source[source.index("import importlib") :]
    from emews.contrib.optuna import OptunaSampler

    check_optimizer(lambda seed: OptunaSampler(seed=seed), budget=16, workers=2)


def test_coming_from_optuna_ports_a_conditional_study_as_written(emews_cmd, tmp_path: Path) -> None:
    """docs/coming-from-optuna.md's conditional study (a choice of optimizer with its own
    parameters, a stepped int as an ordered list, mixed categorical values, a fixed parameter) runs
    as written, and its rerun of the best point by a sweep of a points file gets the same value."""
    doc = (REPO / "docs" / "coming-from-optuna.md").read_text()
    (tmp_path / "study.py").write_text(python_block("# study.py", doc))
    workflow = next(b for b in re.findall(r"```yaml\n(.*?)```", doc, re.S) if "# study.yaml" in b)
    (tmp_path / "study.yaml").write_text(workflow)
    proc = emews_cmd("launch", "study.yaml", "--workers", "2", timeout=240)
    assert proc.returncode == 0, proc.stderr
    from emews import load

    exp = load(tmp_path / "experiments" / "study-001")
    assert len(exp.results) == 30 and set(exp.results["status"]) == {"ok"}
    assert set(exp.results["p:units"]) <= {16, 32, 48, 64} and exp.results["m:size"].notna().all()
    best = exp.best(1).iloc[0]
    point = {c[2:]: best[c].item() if hasattr(best[c], "item") else best[c] for c in best.index if c.startswith("p:")}
    (tmp_path / "best.txt").write_text(dumps_point(point) + "\n")
    rerun = re.sub(r"^optimizer: .*$", "optimizer: {name: sweep, options: {file: best.txt}}", workflow, flags=re.M)
    (tmp_path / "rerun.yaml").write_text(re.sub(r"^budget: .*\n", "", rerun, flags=re.M))
    proc = emews_cmd("launch", "rerun.yaml", "--workers", "1", timeout=240)
    assert proc.returncode == 0, proc.stderr
    again = load(tmp_path / "experiments" / "rerun-001").results
    assert len(again) == 1 and again["objective"].iloc[0] == best["objective"]


def console_block(command: str, text: str) -> list[str]:
    """The lines a ``console`` block of ``text`` shows after ``$ command`` (up to its next prompt)."""
    for block in re.findall(r"```console\n(.*?)```", text, re.S):
        lines = block.splitlines()
        if f"$ {command}" in lines:
            after = lines[lines.index(f"$ {command}") + 1 :]
            return after[: next((i for i, line in enumerate(after) if line.startswith("$ ")), len(after))]
    raise AssertionError(f"no console block runs {command!r}")


def test_a_mistake_in_the_workflow_prints_what_the_docs_show(emews_cmd, tmp_path: Path) -> None:
    """The README's and the workflow reference's workflow with its keys mistyped: ``emews check
    wf.yaml`` prints the lines the docs show, naming the file as typed (it printed the absolute
    path, and the README left out the 'did you mean'), exit 2."""
    reference = (REPO / "docs" / "workflow-reference.md").read_text()
    workflow = next(b for b in re.findall(r"```yaml\n(.*?)```", README, re.S) if b.startswith("optimizer:"))
    assert workflow in reference
    (tmp_path / "wf.yaml").write_text(workflow.replace("lower: -32.768", "lowr: -32.768"))
    proc = emews_cmd("check", "wf.yaml")
    assert (proc.returncode, proc.stderr.splitlines(), proc.stdout) == (2, console_block("emews check wf.yaml", README), "")
    (tmp_path / "wf.yaml").write_text(
        workflow.replace("lower: -32.768", "lowr: -32.768").replace("evaluations: 200", "evaluation: 200")
    )
    proc = emews_cmd("check", "wf.yaml")
    assert (proc.returncode, proc.stderr.splitlines()) == (2, console_block("emews check wf.yaml", reference))
    (tmp_path / "wf.yaml").write_text(workflow)
    proc = emews_cmd("check", "wf.yaml")
    assert proc.returncode == 0 and proc.stdout.startswith("wf.yaml: ok — optimizer random, 6 parameters, budget 200")


def listed_files(text: str) -> set[str]:
    """The top-level names the ``experiments/random-001/`` listing of ``text`` shows."""
    block = re.search(r"^```\n(experiments/random-001/\n.*?)^```", text, re.S | re.M).group(1)
    return {m.group(1).split("/")[0] for m in re.finditer(r"^  (\S+)", block, re.M)}


def test_the_experiment_directory_listings_name_every_file_a_run_leaves(emews_cmd, tmp_path: Path) -> None:
    """The README's and docs/experiments.md's listings of an experiment directory name every file a
    finished run leaves there (the README's left out exit-status.json)."""
    from testutil import write_workflow

    wf = write_workflow(tmp_path, budget={"evaluations": 2})
    assert emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=240).returncode == 0
    left = {p.name for p in (tmp_path / "exp").iterdir()}
    for text in (README, (REPO / "docs" / "experiments.md").read_text()):
        assert left - listed_files(text) == set()
