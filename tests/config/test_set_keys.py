"""``--set KEY=VALUE``: a mistake is named with the key as the user typed it, ``workflow.`` and
``site.`` included (``--set workflow.foo=1`` said '--set: foo: unknown key').

Every command reads ``--set`` one way: the cli routes an item by its key's first part and passes it
on as typed; the workflow's loader (``_blamed_on_overrides``) and the site's (``key_origin``) apply it
less its prefix and name it with it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emews.cli import main

#: --set item -> the key its one line names ('emews: error: --set: KEY: ...')
NAMED = {
    "workflow.foo=1": "workflow.foo",
    "workflow.budget.evalutions=3": "workflow.budget.evalutions",
    "workflow.budget.evaluations=abc": "workflow.budget.evaluations",
    "workflow.budget=3": "workflow.budget",
    "workflow.optimizer.options.seeed=1": "workflow.optimizer.options.seeed",
    "workflow.optimizer.options.backlog=0": "workflow.optimizer.options.backlog",
    "workflow.optimizer={name: rnadom}": "workflow.optimizer.name",
    "workflow.trial_scheduler.options.max_t=9": "workflow.trial_scheduler.name",
    "workflow.budget.evaluations.x=2": "workflow.budget.evaluations.x",
    "workflow..a=1": "workflow..a",
    "site.scheduler.acount=x": "site.scheduler.acount",
    "site.foo=1": "site.foo",
    "site.node={gpus: abc}": "site.node.gpus",
    "site.scheduler.nodes.x=1": "site.scheduler.nodes.x",
    "site.launcher.workers_per_node=[x": "site.launcher.workers_per_node",
    "budget.evaluations=abc": "budget.evaluations",
    "scheduler.nodes=x": "scheduler.nodes",
}


def _named(err: str) -> str | None:
    """The key a '--set' line names, or None when the line is not --set's."""
    head = "emews: error: --set: "
    return err[len(head):].partition(": ")[0] if err.startswith(head) else None


@pytest.mark.parametrize("item", list(NAMED))
def test_a_set_mistake_names_the_key_as_typed(item: str, capsys: pytest.CaptureFixture) -> None:
    for command in (["check", "random", "--site", "polaris"], ["launch", "random", "--site", "polaris", "--dry-run"]):
        assert main([*command, "--set", item]) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and _named(err) == NAMED[item], err


@pytest.mark.parametrize("item, key", [("workflow.seed=3", "workflow.seed"),
                                       ("site.scheduler.acount=x", "site.scheduler.acount"),
                                       ("workflow.budget.evaluations=abc", "workflow.budget.evaluations"),
                                       ("site.scheduler.walltime=abc", "site.scheduler.walltime")])
def test_resume_names_the_key_as_typed(item: str, key: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``emews resume EXP --set workflow.seed=3`` said '--set: resume can only change ...' without the
    key, and read workflow.budget.evaluations=N as a key it may not change."""
    exp = tmp_path / "exp"
    assert main(["launch", "random", "--site", "local", "--workers", "1", "--exp-dir", str(exp),
                 "--set", "budget.evaluations=2"]) == 0
    capsys.readouterr()
    before = (exp / "workflow.yaml").read_text(), (exp / "site.yaml").read_text()
    assert main(["resume", str(exp), "--set", item]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and _named(err) == key, err
    assert ((exp / "workflow.yaml").read_text(), (exp / "site.yaml").read_text()) == before
    assert main(["resume", str(exp), "--set", "workflow.budget.evaluations=3"]) == 0  # the prefix is read
    assert "evaluations: 3" in (exp / "workflow.yaml").read_text()


WORDS = ["budget", "evaluations", "optimizer", "options", "seed", "space", "task", "scheduler", "node", "gpus",
         "launcher", "walltime", "name", "x1", "nodes", "trial_scheduler", "environment"]
PARTS = st.one_of(st.sampled_from(WORDS), st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True))
KEYS = st.tuples(st.sampled_from(["", "workflow.", "site."]), st.lists(PARTS, min_size=1, max_size=4)).map(
    lambda t: t[0] + ".".join(t[1]))
VALUES = st.sampled_from(["1", "-3", "abc", "[x", "{a: 1}", "0.5", "true", "[1, 2]"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=KEYS, value=VALUES)
def test_any_set_key_is_named_as_typed(key: str, value: str, capsys: pytest.CaptureFixture) -> None:
    """Whatever the dotted key and value, a --set mistake is one line, exit 2, naming the key in the
    form the user typed it: its first part (``workflow``, ``site`` or the section) as typed, and
    the key itself or one under it whenever the mistake is that key's."""
    code = main(["check", "random", "--site", "local", "--set", f"{key}={value}"])
    err = capsys.readouterr().err
    assert code in (0, 2) and "Traceback" not in err, err
    if code == 0:
        return
    assert len(err.splitlines()) == 1, err
    named = _named(err)
    if named is None:  # a mistake of another key (a site's account the key's change requires)
        return
    assert named.split(".")[0] == key.split(".")[0], (key, err)
    if "unknown key" in err or "malformed" in err or "must be" in err:
        assert named == key or named.startswith(key + ".") or key.startswith(named + "."), (key, err)


@pytest.mark.parametrize("item, key", [("scheduler.account=ABC", "scheduler.account"),
                                       ("site.node.gpus=4", "site.node.gpus")])
def test_check_without_a_site_refuses_a_site_key(item: str, key: str, capsys: pytest.CaptureFixture) -> None:
    """``emews check random --set scheduler.account=ABC`` (no --site) said 'ok': the key was
    dropped unread. It is one line naming it and that --site reads it; with --site it is checked."""
    assert main(["check", "random", "--set", item]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and _named(err) == key and "--site SITE" in err, err
    assert main(["check", "random", "--site", "perlmutter", "--set", "scheduler.account=m1", "--set", item]) == 0, \
        capsys.readouterr().err
