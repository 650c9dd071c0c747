"""An R optimizer declares its options as its entry function's ``options`` default list
(``function(evaluator, space, options = list(propose_points = 2L))``): a misspelt option is one line
at ``emews check`` and ``emews launch`` naming ``optimizer.options.NAME`` and the allowed names,
exit 2, no experiment; the run gets the declared defaults under the options given. An entry function
that declares none takes any option, as before. Real R (rpy2), never skipped."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from emews.cli import main
from emews.core.space import Float, Space
from emews.objective.function import ObjectiveRef
from testutil import refused_in_one_line, run_inline, write_workflow

DECLARED = """
search <- function(evaluator, space, options = list(propose_points = 2L, spread = 0.5)) {
  while (evaluator$remaining() > 0) {
    n <- min(options$propose_points, evaluator$remaining())
    evaluator$map(data.frame(x = runif(n, 0, 1)))
  }
  options[order(names(options))]
}
"""
UNDECLARED = DECLARED.replace("options = list(propose_points = 2L, spread = 0.5)", "options")
NOT_A_LIST = DECLARED.replace("list(propose_points = 2L, spread = 0.5)", "c(2, 0.5)")


@pytest.fixture(autouse=True, scope="module")
def _r_works() -> None:
    """R and rpy2 work: asked once for the module (each ask starts R in a child process)."""
    from emews.contrib import rbridge

    try:
        rbridge.missing_r_packages([])
    except rbridge.RUnavailable as exc:
        pytest.fail(f"these tests need R and rpy2: {exc}", pytrace=False)


def _sources(folder: Path, code: str) -> None:
    """The R optimizer ``code`` as opt.R and an objective returning ``x`` as obj.py in ``folder``."""
    (folder / "opt.R").write_text(textwrap.dedent(code))
    (folder / "obj.py").write_text("def run(params):\n    return params['x']\n")


def _workflow(folder: Path, code: str, **options: Any) -> Path:
    _sources(folder, code)
    return write_workflow(
        folder,
        optimizer={
            "name": "emews.contrib.rbridge:ROptimizer",
            "options": {"script": "opt.R", "entry": "search", **options},
        },
        objective={"module": "obj.py"},
        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0}},
        budget={"evaluations": 4},
        task={"timeout": 60, "isolation": "inline"},
    )


def _run(folder: Path, code: str, **options: Any) -> Any:
    """Four evaluations of ``code``'s ``search`` (ROptimizer with ``options``) on one thread
    worker, which all complete; the value the entry function returned (its options)."""
    from emews.contrib.rbridge import ROptimizer

    _sources(folder, code)
    summary, optimizer = run_inline(
        lambda: ROptimizer(script=folder / "opt.R", entry="search", **options),
        space=Space({"x": Float(0.0, 1.0)}),
        objective=ObjectiveRef(str(folder / "obj.py")),
        budget=4,
        workers=1,
        seed=7,
    )
    assert summary.completed == 4, summary
    return optimizer.value


def test_a_misspelt_r_option_is_refused_naming_it_and_the_allowed_names(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = _workflow(tmp_path, DECLARED, propose_poitns=4)
    assert refused_in_one_line(capsys, path) == (
        f"emews: error: {path}: optimizer.options.propose_poitns: unknown option 'propose_poitns'; "
        "did you mean 'propose_points'? (allowed: propose_points, seed, spread)"
    )
    path = _workflow(tmp_path, DECLARED, propose_points=4, seed=3)
    assert main(["check", str(path)]) == 0, capsys.readouterr().err


def test_an_options_default_that_is_no_named_list_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    line = refused_in_one_line(capsys, _workflow(tmp_path, NOT_A_LIST))
    assert ": optimizer.options.script: search's options: " in line and "must be a named list" in line, line
    assert "(allowed: an R file that defines the function 'search')" in line, line


def test_an_entry_function_that_declares_no_options_takes_any(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = _workflow(tmp_path, UNDECLARED, propose_points=2, anything=1)
    assert main(["check", str(path)]) == 0, capsys.readouterr().err


def test_the_run_gets_the_declared_defaults_under_the_options_given(tmp_path: Path) -> None:
    assert _run(tmp_path, DECLARED, propose_points=3) == {"propose_points": 3, "spread": 0.5}


#: an entry function that declares what its options take: one of the values (the first the
#: default) and an integer of at least 1 (emews_option)
VALUED = DECLARED.replace(
    "options = list(propose_points = 2L, spread = 0.5)",
    'options = list(propose_points = emews_option(2L, min = 1L, integer = TRUE), mode = c("fast", "slow"))',
)


def test_a_value_its_declaration_does_not_allow_is_refused_and_the_run_gets_the_declared_defaults(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The values were the R function's own business (mbo kept its checks and defaults in Python
    beside the names R declared): its declaration now says them once, for check and run."""
    monkeypatch.chdir(tmp_path)
    for options, said in (
        ({"mode": "medium"}, "mode: invalid value 'medium' (allowed: fast, slow)"),
        ({"propose_points": 0}, "propose_points: must be at least 1, not 0 (allowed: an integer >= 1)"),
        ({"propose_points": 1.5}, "propose_points: must be an integer, not 1.5"),
    ):
        path = _workflow(tmp_path, VALUED, **options)
        line = refused_in_one_line(capsys, path)
        assert line.startswith(f"emews: error: {path}: optimizer.options.{said}"), line
    path = _workflow(tmp_path, VALUED, mode="slow", propose_points=3)
    assert main(["check", str(path)]) == 0, capsys.readouterr().err
    assert _run(tmp_path, VALUED) == {"mode": "fast", "propose_points": 2}


def test_mbo_takes_the_options_its_r_function_declares_through_the_same_check(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mbo is an R optimizer like the others: ``emews_mbo`` declares its options (their defaults)
    and ``MBO.check`` refuses another name through ROptimizer's check, naming the declared ones.
    Before, mbo.R declared none and optimizers/mbo.py kept its own list of names."""
    from emews.contrib.rbridge import declared_options
    from emews.optimizers.mbo import MBO

    monkeypatch.chdir(tmp_path)
    declared = declared_options(MBO.script, MBO.entry)
    assert declared is not None and {"n_initial", "infill", "lambda", "ntree"} <= set(declared), declared
    allowed = ", ".join(sorted({"seed", *declared}))
    path = write_workflow(tmp_path, optimizer={"name": "mbo", "options": {"seed": 1, "ntre": 50}})
    assert refused_in_one_line(capsys, path) == (
        f"emews: error: {path}: optimizer.options.ntre: unknown option 'ntre'; did you mean 'ntree'? "
        f"(allowed: {allowed})"
    )
    path = write_workflow(tmp_path, optimizer={"name": "mbo", "options": {"seed": 1, "ntree": 50, "lambda": 2}})
    assert main(["check", str(path)]) == 0, capsys.readouterr().err
    assert declared["infill"].choices == ("cb", "ei") and declared["ntree"].integer  # mbo.R says them
    for name, value, said in (
        ("ntree", 0, "must be at least 1, not 0"),
        ("candidates", 2.5, "must be an integer"),
        ("transform", "sqrt", "invalid value 'sqrt' (allowed: log, rank, none)"),
    ):
        path = write_workflow(tmp_path, optimizer={"name": "mbo", "options": {"seed": 1, name: value}})
        line = refused_in_one_line(capsys, path)
        assert line.startswith(f"emews: error: {path}: optimizer.options.{name}: {said}"), line


def _counting_r_starts(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The arguments of every child process the R bridge starts from now on (each one an R start)."""
    from emews.contrib import rbridge

    started: list[list[str]] = []
    real = rbridge._probe

    def probe(code: str, args: Any) -> str:
        started.append(list(args))
        return real(code, args)

    monkeypatch.setattr(rbridge, "_probe", probe)
    return started


def test_a_script_checked_again_starts_no_r_until_its_text_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each check asked R in a child process (seconds each; mbo's two, packages then options, 50 s
    at load 17): the options a script declares are kept (emews.core.check_cache) while its text is the same."""
    from emews.contrib.rbridge import ROptimizer

    monkeypatch.setenv("EMEWS_CHECK_CACHE", str(tmp_path / "cache"))
    space = Space({"x": Float(0.0, 1.0)})
    _sources(tmp_path, DECLARED)
    ROptimizer(script=tmp_path / "opt.R", entry="search", propose_points=3).check(space)
    started = _counting_r_starts(monkeypatch)
    with pytest.raises(ValueError, match="unknown option 'mode'"):
        ROptimizer(script=tmp_path / "opt.R", entry="search", mode="slow").check(space)
    assert started == []
    _sources(tmp_path, VALUED)  # the same file, another text: R is asked again
    ROptimizer(script=tmp_path / "opt.R", entry="search", mode="slow").check(space)
    assert len(started) == 1, started


def test_mbo_checks_its_packages_and_options_in_one_r_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from emews.optimizers.mbo import MBO

    monkeypatch.setenv("EMEWS_CHECK_CACHE", str(tmp_path / "cache"))
    started = _counting_r_starts(monkeypatch)
    MBO(seed=3, ntree=50).check(Space({"x": Float(0.0, 1.0)}))
    assert len(started) == 1, started
    MBO(seed=4, ntree=60).check(Space({"x": Float(0.0, 1.0)}))  # other options: R's answer is kept
    assert len(started) == 1, started


#: an R optimizer whose declared options come from a file it sources, noting each time R sources it
SOURCING = """
cat("sourced\\n", file = "{notes}", append = TRUE)
source("{rule}")
search <- function(evaluator, space, options = RULE_OPTIONS) {{
  evaluator$map(data.frame(x = runif(evaluator$remaining(), 0, 1)))
}}
"""


def test_a_passed_check_is_kept_across_commands_until_a_file_r_sourced_changes_and_a_refusal_never(
    emews_cmd, tmp_path: Path
) -> None:
    """The second ``emews check`` starts no R; an edit of the file the script sources is seen by the
    next one. R's answer (the options declared) is kept, not the refusal of an option, said again from
    it each time; a script R cannot source is asked of R again each time."""
    rule, notes = tmp_path / "rule.R", tmp_path / "sourced.txt"
    rule.write_text("RULE_OPTIONS <- list(propose_points = 2L)\n")
    path = _workflow(tmp_path, SOURCING.format(rule=rule, notes=notes), propose_points=3)
    emews_cmd.env["EMEWS_CHECK_CACHE"] = str(tmp_path / "cache")

    def checked(status: int, said: str, times: int) -> None:
        proc = emews_cmd("check", str(path), timeout=300)
        sourced = len(notes.read_text().split()) if notes.exists() else 0
        assert proc.returncode == status and said in proc.stderr and sourced == times, (sourced, proc.stderr)

    checked(0, "", 1)  # asked of R
    checked(0, "", 1)  # kept
    rule.write_text("RULE_OPTIONS <- list(points = 2L)\n")
    checked(2, "optimizer.options.propose_points: unknown option 'propose_points'", 2)
    checked(2, "optimizer.options.propose_points: unknown option 'propose_points'", 2)
    rule.write_text('stop("no rule today")\n')
    checked(2, "no rule today", 3)
    checked(2, "no rule today", 4)  # R's refusal: never kept
