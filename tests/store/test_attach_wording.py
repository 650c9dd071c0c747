"""What ``emews attach`` says, on a real PostgreSQL and a finished pooled experiment (docs/postgres.md,
"Pools"): a workflow key in its ``--set`` (which sets the pool's site) is named as such, and its
batch script names rank 0 for what it runs, the pool's distributor."""

from __future__ import annotations

from pathlib import Path

import pytest
from pgserver import PgServer
from pooled import gated_command, gated_workflow

from testutil import EmewsCommand


@pytest.fixture
def pooled(pg_server: PgServer, tmp_path: Path) -> tuple[EmewsCommand, Path]:
    """A pooled experiment whose two evaluations are stored, and the command that made it."""
    wf = gated_workflow(tmp_path, pg_server.url(), 2)
    cmd = gated_command(tmp_path)
    (tmp_path / "open").touch()
    launch = cmd("launch", str(wf), "--workers", "1", "--pools", "1", "--exp-dir", "exp", timeout=300)
    assert launch.returncode == 0, launch.stderr
    return cmd, tmp_path / "exp"


def test_a_workflow_key_in_attach_set_is_named_as_one(pooled: tuple[EmewsCommand, Path]) -> None:
    """``emews attach EXP --set budget.evaluations=5``: one line naming ``--set budget.evaluations``
    as a workflow key that a pool does not change, and how the budget changes (before: 'EXP/site.yaml:
    budget: unknown key', blaming a file the user never touched); no pool folder is made. A key that
    is in neither file is blamed on ``--set`` too, not on site.yaml."""
    cmd, exp = pooled
    for dry in ([], ["--dry-run"]):
        refused = cmd("attach", "exp", "--set", "budget.evaluations=5", *dry, timeout=120)
        assert refused.returncode == 2, refused.stderr
        assert refused.stderr.splitlines() == [
            "emews: error: --set: budget.evaluations: a key of the experiment's workflow, which a pool does not "
            "change: emews attach --set sets keys of the pool's site (allowed: site keys (name, description, "
            "requires_account, scheduler, launcher, node, environment); the workflow's budget changes with "
            f"emews resume {exp} --set budget.evaluations=... once its optimizer stopped)"
        ]
    unknown = cmd("attach", "exp", "--set", "nodes.cores=4", timeout=120)
    assert unknown.returncode == 2 and unknown.stderr.startswith(
        "emews: error: --set: nodes.cores: unknown key 'nodes'"  # the key as typed
    ), unknown.stderr
    assert "site.yaml" not in unknown.stderr, unknown.stderr
    assert not (exp / "pools").exists()


def test_attach_dry_run_names_the_pools_rank_0_its_distributor(pooled: tuple[EmewsCommand, Path]) -> None:
    """The batch script of ``emews attach --site perlmutter --dry-run`` says '1 worker + 1 pool
    distributor = 2 ranks' (before: '+ 1 optimizer', while the optimizer runs elsewhere)."""
    cmd, exp = pooled
    dry = cmd("attach", "exp", "--site", "perlmutter", "--set", "scheduler.account=m1", "--dry-run", timeout=120)
    assert dry.returncode == 0, dry.stderr
    assert "# emews site perlmutter: 1 worker + 1 pool distributor = 2 ranks on 1 node\n" in dry.stdout, dry.stdout
    assert "optimizer" not in dry.stdout, dry.stdout


def test_attach_to_a_finished_experiment_says_so_as_serve_does(pooled: tuple[EmewsCommand, Path]) -> None:
    """``emews attach EXP`` of a finished pooled experiment (its budget's evaluations stored, none
    queued or leased) started a local pool that did nothing and exited 0, where ``emews serve EXP``
    says 'nothing to serve' in one line: attach says the same, exits as serve does, and makes no
    pool folder. Its dry run still prints the pool's command."""
    cmd, exp = pooled
    serve = cmd("serve", "exp", timeout=120)
    attach = cmd("attach", "exp", timeout=120)
    said = serve.stderr.splitlines()
    assert len(said) == 1 and said[0].startswith("emews: nothing to serve: "), serve.stderr
    assert attach.stderr.splitlines() == [said[0].replace("nothing to serve", "nothing to attach a pool to")], (
        attach.stderr
    )
    assert "emews resume" in said[0] and "budget.evaluations" in said[0], said
    assert attach.returncode == serve.returncode == 0, (attach.returncode, serve.returncode)
    assert not (exp / "pools").exists()
    dry = cmd("attach", "exp", "--dry-run", timeout=120)
    assert dry.returncode == 0 and "--pool" in dry.stdout, dry.stderr
