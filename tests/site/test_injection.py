"""Hostile site values cannot inject into job.sh (findings 4a-4d).

Every built-in site, every value that is rendered into the batch script and is not raw by
design, every hostile value: ``emews launch --dry-run`` either refuses it (exit 2, nothing
written) or renders a script that ``bash -n`` accepts and that, run under bash with fake
launchers, runs no injected command and hands the launcher the exp dir unchanged.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import emews.cli
import emews.site.launchers
from emews.core.errors import ConfigError
from emews.site import builtin_site_dir, load_site
from emews.site.jobs import job_command
from site_helpers import LOOPBACK_SITE

SITES = sorted(p.stem for p in builtin_site_dir().glob("*.yaml"))
LAUNCHERS = ("srun", "jsrun", "mpiexec", "aprun")
VAR = "EMEWS_PROBE"
#: Hostile values; {m} is the marker file an injected command would create.
HOSTILE = ["a b", "x; touch {m}", "$(touch {m})", "`touch {m}`", "a'b\"c", "x\ntouch {m}\n#",
           "--job-name=x", "x --comment=INJECTED --job-name=hijacked"]
#: Where a value goes: a --set key, "exp-dir", "var-name", "var-value" or "$ENV_VAR".
FIELDS = ["scheduler.account", "scheduler.queue", "scheduler.job_name", "scheduler.walltime",
          "scheduler.nodes", "launcher.command", "var-name", "var-value", "exp-dir",
          "$EMEWS_ACCOUNT", "$EMEWS_QUEUE"]

_FAKE_LAUNCHER = """#!/bin/bash
# Fake launcher: records its arguments (NUL-separated) and $%s, runs nothing.
printf '%%s\\0' "$@" > "$FAKE_LOG.argv"
printf '%%s' "${%s-unset}" > "$FAKE_LOG.var"
""" % (VAR, VAR)


@pytest.fixture
def fake_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Fake launchers first on PATH and as ``{python_bin}`` (the local site's mpiexec)."""
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    for name in LAUNCHERS:
        path = bindir / name
        path.write_text(_FAKE_LAUNCHER)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(emews.site.launchers, "python_bin", lambda: str(bindir))
    monkeypatch.chdir(tmp_path)
    return bindir


def _case(site: str, field: str, value: str, root: Path) -> tuple[list[str], dict[str, str], Path]:
    """``--set`` items, environment and exp dir that put ``value`` into ``field``."""
    items = [] if field in ("scheduler.account", "$EMEWS_ACCOUNT") else ["scheduler.account=ABC1"]
    environ: dict[str, str] = {}
    exp = root / "exp"
    if field == "exp-dir":
        exp = root / "exp" / value.lstrip("/")
    elif field == "var-name":
        items.append("environment.vars=" + json.dumps({value: "v"}))
    elif field == "var-value":
        items.append("environment.vars=" + json.dumps({VAR: value}))
    elif field.startswith("$"):
        environ[field[1:]] = value
    else:
        items.append(f"{field}={json.dumps(value)}")
    return items, environ, exp


def _run_script(text: str, exp: Path, fake_bin: Path) -> subprocess.CompletedProcess[str]:
    exp.mkdir(parents=True, exist_ok=True)
    script = exp / "job.sh"
    script.write_text(text)
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0, text
    env = {**os.environ, "PATH": f"{fake_bin}{os.pathsep}{os.environ['PATH']}",
           "FAKE_LOG": str(fake_bin / "log")}
    env.pop(VAR, None)
    return subprocess.run(["bash", str(script)], env=env, cwd=fake_bin.parent,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("site", SITES)
def test_hostile_value_is_refused_or_inert(site: str, field: str, fake_bin: Path,
                                           tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "PWNED"
    outcomes = []
    for n, template in enumerate(HOSTILE):
        value = template.format(m=marker)
        items, environ, exp = _case(site, field, value, tmp_path / f"v{n}")
        for var in ("EMEWS_ACCOUNT", "EMEWS_QUEUE"):
            monkeypatch.delenv(var, raising=False)
        for var, text in environ.items():
            monkeypatch.setenv(var, text)
        argv = ["launch", "random", "--site", site, "--exp-dir", str(exp), "--dry-run"]
        rc = emews.cli.main(argv + [a for item in items for a in ("--set", item)])
        out, err = capsys.readouterr()
        assert not exp.exists()
        if rc == 2:
            assert err.startswith("emews: error: ") and err.count("\n") == 1, err
            outcomes.append("refused")
            continue
        assert rc == 0, err
        loaded = load_site(site, items, environ=environ)
        if loaded.is_local:  # the local dry run prints a command line, not a script
            script = loaded.render_batch_script(exp, loaded.total_workers(None), job_command(exp))
        else:
            script, hint = out.rstrip("\n").rsplit("\n", 1)
            said = "# dry run: nothing written; emews launch writes it to job.sh and submits it with: "
            assert hint.startswith(said) and shlex.split(hint.removeprefix(said))[-1] == str(exp / "job.sh")
        proc = _run_script(script, exp, fake_bin)
        assert not marker.exists(), f"{field}={value!r} ran a command:\n{script}"
        if field != "launcher.command" and loaded.is_local:
            assert proc.returncode == 0, proc.stderr
        elif field != "launcher.command":  # job.sh's last line: the fake launcher ran no run, and it says so
            assert proc.returncode == 1 and f"no summary of it in {exp}" in proc.stderr, proc.stderr
        if field != "launcher.command":
            argv_seen = (fake_bin / "log.argv").read_text().split("\0")[:-1]
            run_at = argv_seen.index("run")  # ... python -m emews run EXP [--lease TOKEN]
            assert argv_seen[run_at - 3:run_at + 2] == job_command(exp)
            want_var = value if field == "var-value" else "unset"
            assert (fake_bin / "log.var").read_text() == want_var
        outcomes.append("inert")
    if field in ("scheduler.account", "scheduler.queue", "scheduler.job_name", "var-name",
                 "$EMEWS_ACCOUNT", "$EMEWS_QUEUE", "scheduler.walltime", "scheduler.nodes"):
        assert set(outcomes) == {"refused"}, outcomes


@pytest.mark.parametrize("site", ["frontier", "polaris", "summit"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0/"),
                     min_size=1, max_size=12))
def test_any_exp_dir_is_refused_or_kept_whole(site: str, value: str, in_tmp: Path) -> None:
    """One directive line per template argument, ``bash -n`` clean, exp dir intact in ``cd``."""
    loaded = load_site(site, ["scheduler.account=A"], environ={})
    exp = Path("/scratch") / value
    baseline = loaded.render_batch_script(Path("/scratch/x"), 3, job_command(Path("/scratch/x")))
    try:
        text = loaded.render_batch_script(exp, 3, job_command(exp))
    except ConfigError as exc:
        assert exc.key == "--exp-dir"
        return
    lines = text.splitlines()
    assert len(lines) == len(baseline.splitlines())
    prefix = loaded.scheduler.prefix
    head = lines[: next(i for i, line in enumerate(lines) if line.startswith("# emews site ")) + 1]
    directives = [line for line in head[1:] if line.startswith("#")]  # and the site's comment, last
    assert [d.split()[0] for d in directives[:-1]] == [prefix] * (len(directives) - 1)
    if prefix != "#SBATCH":  # no quoting there: the path must stay one word
        base = [line for line in baseline.splitlines()[1 : len(head)] if line.startswith("#")]
        assert [len(d.split()) for d in directives] == [len(d.split()) for d in base]
    cd = next(line for line in lines if line.startswith("cd "))
    assert shlex.split(cd) == ["cd", str(exp)]
    assert shlex.split(lines[lines.index("emews_launcher=$!") - 1])[-2:] == [str(exp), "&"]  # in the background
    path = in_tmp / "job.sh"
    path.write_text(text)
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0


@settings(max_examples=80, deadline=None)
@given(key=st.sampled_from(["account", "queue", "job_name"]),
       value=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
                     min_size=1, max_size=10))
def test_any_scheduler_word_is_refused_or_one_plain_word(key: str, value: str) -> None:
    """Whatever the text, what reaches a directive is one word with no shell or quote chars."""
    try:
        site = load_site("frontier", ["scheduler.account=A",
                                      f"scheduler.{key}={json.dumps(value)}"], environ={})
    except ConfigError as exc:
        assert exc.key == f"scheduler.{key}" and exc.file == "--set"
        assert exc.allowed
        return
    word = getattr(site.config.scheduler, key)
    assert shlex.split(word) == [word] and not word.startswith("-")
    assert shlex.quote(word) == word


@pytest.mark.parametrize("extra,exp_name", [
    (["--set", 'scheduler.queue="debug\\ntouch PWNED_queue"'], "sj1"),              # 4b
    (["--set", "scheduler.account=x --comment=INJECTED_VIA_ACCOUNT --job-name=hijacked"], "sj2"),
    (["--set", 'scheduler.job_name="j\\ntouch PWNED_job"'], "sj3"),                 # 4b
    (["--set", 'environment.vars={"A=1; touch PWNED_varkey; B": "x"}'], "sj4"),       # 4c
    ([], "x\ntouch PWNED_nl\n#"),                                                     # 4b exp dir
])
def test_findings_are_refused_before_anything_is_written(in_tmp: Path, extra: list[str],
                                                         exp_name: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The reproductions of 4a-4c, submitting for real: exit 2, no experiment dir, no job."""
    exp = in_tmp / exp_name
    rc = emews.cli.main(["launch", "random", "--site", str(LOOPBACK_SITE), "--exp-dir", str(exp),
                         *extra])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "allowed: " in err, err
    assert list(in_tmp.iterdir()) == []


def test_exp_dir_a_pbs_directive_cannot_carry_is_refused_before_writing(
        in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exp = in_tmp / "my dir"
    rc = emews.cli.main(["launch", "random", "--site", "polaris", "--exp-dir", str(exp),
                         "--set", "scheduler.account=ABC1"])
    err = capsys.readouterr().err
    assert rc == 2 and "--exp-dir" in err and "#PBS" in err, err
    assert list(in_tmp.iterdir()) == []
