"""Which emews ran (``emews.core.build``): the imported tree's own version, the commit of its git
checkout as git itself names it, and a digest of its source that tells a changed checkout apart;
an experiment records them at launch and at every resume."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

import emews
from emews.core.build import Build, checkout_commit, source_digest
from testutil import EmewsCommand, write_workflow


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git checkout with two commits on ``main``."""
    folder = tmp_path / "repo"
    folder.mkdir()
    git(folder, "init", "-q", "-b", "main")
    for n in (1, 2):
        (folder / "f.py").write_text(f"n = {n}\n")
        git(folder, "add", "f.py")
        git(folder, "commit", "-q", "-m", str(n))
    return folder


@pytest.mark.parametrize("how", ["branch", "detached", "packed", "worktree"])
def test_the_commit_of_a_checkout_is_the_one_git_names(repo: Path, tmp_path: Path, how: str) -> None:
    checkout = repo
    if how == "detached":
        git(repo, "checkout", "-q", "HEAD~1")
    elif how == "packed":  # refs/heads/main only in packed-refs (as after git gc)
        git(repo, "pack-refs", "--all")
        assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    elif how == "worktree":  # .git is a file naming the worktree's folder; refs are the main checkout's
        checkout = tmp_path / "other"
        git(repo, "worktree", "add", "-q", "-b", "side", str(checkout), "HEAD~1")
        assert (checkout / ".git").is_file()
    assert checkout_commit(checkout) == git(checkout, "rev-parse", "HEAD")


def test_a_folder_that_is_no_checkout_has_no_commit(tmp_path: Path) -> None:
    assert checkout_commit(tmp_path) is None
    (tmp_path / ".git").mkdir()  # not a repository: no HEAD
    assert checkout_commit(tmp_path) is None


def test_the_source_digest_changes_with_a_file_and_not_with_caches(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "a.py").write_text("a = 1\n")
    (tmp_path / "pkg" / "sub" / "b.py").write_text("b = 1\n")
    first = source_digest(tmp_path / "pkg")
    (tmp_path / "pkg" / "__pycache__").mkdir()
    (tmp_path / "pkg" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    (tmp_path / "pkg" / "notes.txt").write_text("x")
    assert source_digest(tmp_path / "pkg") == first
    (tmp_path / "pkg" / "sub" / "b.py").write_text("b = 2\n")
    assert source_digest(tmp_path / "pkg") != first


def test_a_build_record_reads_back_and_a_foreign_one_is_none() -> None:
    build = Build("0.2.0", "ab" * 20, "cd" * 32)
    assert Build.from_record(json.loads(json.dumps(build.record()))) == build
    assert str(build) == "emews 0.2.0 (commit abababababab, source cdcdcdcdcdcd)"
    assert str(Build("0.2.0")) == "emews 0.2.0"
    for foreign in (None, "0.2.0", {}, {"version": 2}, {"version": "1", "commit": 5}):
        assert Build.from_record(foreign) is None


def test_an_experiment_records_the_emews_that_ran_not_the_installed_one(tmp_path: Path) -> None:
    """experiment.json's ``emews_version`` was the installed distribution's (importlib.metadata),
    whatever tree ``PYTHONPATH`` ran: a tree of version 9.9.9 recorded 0.1.0. Now the imported
    tree's version, its commit, and its source digest, which a resume by the same checkout changed
    since records again (the commit alone would say it ran the committed code)."""
    tree = tmp_path / "tree"
    shutil.copytree(
        Path(emews.__file__).parent, tree / "emews", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )  # symbolic links (the clone's optimizers/, objectives/) copied as the folders they name
    (tree / "emews" / "core" / "version.py").write_text('VERSION = "9.9.9"\n')
    git(tree, "init", "-q", "-b", "main")
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", "tree")
    cmd = EmewsCommand(tmp_path)
    cmd.env["PYTHONPATH"] = str(tree)
    wf = write_workflow(tmp_path, budget={"evaluations": 2}, task={"timeout": 30, "isolation": "inline"})
    cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=180, check=True)
    info = json.loads((tmp_path / "exp" / "experiment.json").read_text())
    commit = git(tree, "rev-parse", "HEAD")
    made = {"version": "9.9.9", "commit": commit, "source": source_digest(tree / "emews")}
    assert info["emews_version"] == "9.9.9" and info["emews"] == made and info["format"] == 1, info

    with (tree / "emews" / "core" / "version.py").open("a") as changed:  # not committed
        changed.write("# changed\n")
    cmd("resume", "exp", "--set", "budget.evaluations=3", timeout=180, check=True)
    info = json.loads((tmp_path / "exp" / "experiment.json").read_text())
    assert info["emews"]["commit"] == commit and info["emews"]["source"] == source_digest(tree / "emews")
    assert info["emews"]["source"] != made["source"] and info["emews_version"] == "9.9.9", info
    cmd("report", "exp", timeout=180, check=True)
    report = (tmp_path / "exp" / "report.html").read_text()
    assert f"run: 9.9.9 (commit {commit[:12]}, source {info['emews']['source'][:12]})" in report, report
