"""Rendered batch scripts of every site against reviewed files in expected/.

Regenerate after a reviewed change with ``EMEWS_UPDATE_EXPECTED=1 pytest tests/site``.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from site_helpers import LOOPBACK_SITE
from emews.core.errors import ConfigError
from emews.site import load_site
from emews.site.launchers import python_bin

EXPECTED = Path(__file__).parent / "expected"
EXP_DIR = Path("/scratch/emews/experiments/exp-0001")
PYTHON = "/opt/venv/bin/python"
COMMAND = [PYTHON, "-m", "emews", "run", str(EXP_DIR)]

CASES = {  # expected file stem: (site, overrides, workers)
    "summit": ("summit", ["scheduler.account=ABC123", "scheduler.nodes=2"], None),
    "polaris": ("polaris", ["scheduler.account=ABC123", "scheduler.nodes=2"], None),
    "frontier": ("frontier", ["scheduler.account=ABC123", "scheduler.nodes=2"], None),
    "perlmutter": ("perlmutter", ["scheduler.account=ABC123", "scheduler.nodes=2"], None),
    "aurora": ("aurora", ["scheduler.account=ABC123", "scheduler.nodes=2"], None),
    "local": ("local", [], 4),
    "slurm-loopback": (str(LOOPBACK_SITE), [], None),
}


def render(site_ref: str, overrides: list[str], workers: int | None) -> str:
    site = load_site(site_ref, overrides, environ={})
    text = site.render_batch_script(EXP_DIR, site.total_workers(workers), COMMAND)
    return text.replace(python_bin(), "{python_bin}")


@pytest.mark.parametrize("stem", sorted(CASES))
def test_rendered_script_matches_reviewed_file(in_tmp: Path, stem: str) -> None:
    text = render(*CASES[stem])
    path = EXPECTED / f"{stem}.sh"
    if os.environ.get("EMEWS_UPDATE_EXPECTED") == "1":
        path.write_text(text)
    assert text == path.read_text(), f"rendered script differs from {path}"


@pytest.mark.parametrize("stem", sorted(CASES))
def test_rendered_script_is_valid_bash(in_tmp: Path, stem: str, tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text(render(*CASES[stem]))
    import subprocess
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0


def launcher_words(script: str) -> list[str]:
    """The launcher line's words (the line before ``emews_launcher=$!``: it runs in the background)."""
    lines = script.splitlines()
    words = shlex.split(lines[lines.index("emews_launcher=$!") - 1])
    assert words[-1] == "&"
    return words[:-1]


def test_launcher_line_has_workers_plus_one_ranks(in_tmp: Path) -> None:
    site = load_site("frontier", ["scheduler.account=A", "scheduler.nodes=4"], environ={})
    text = site.render_batch_script(EXP_DIR, 30, COMMAND)
    assert "#SBATCH --ntasks=31" in text
    last = launcher_words(text)
    assert last[:6] == ["srun", "-N", "4", "-n", "31", "--ntasks-per-node=8"]
    assert last[-5:] == COMMAND


def test_odd_paths_are_quoted(in_tmp: Path) -> None:
    exp = Path("/scratch/my exp/it's")
    site = load_site("frontier", ["scheduler.account=A", "environment.vars.MSG=a b"], environ={})
    text = site.render_batch_script(exp, 3, [PYTHON, "-m", "emews", "run", str(exp)])
    assert "export MSG='a b'" in text
    assert launcher_words(text)[-1] == str(exp)
    assert f"cd {shlex.quote(str(exp))}" in text
    assert '#SBATCH --output="/scratch/my exp/it\'s/job-%j.out"' in text.splitlines()


@pytest.mark.parametrize("site_name", ["polaris", "summit"])
def test_directives_that_cannot_quote_refuse_odd_paths(in_tmp: Path, site_name: str) -> None:
    site = load_site(site_name, ["scheduler.account=A"], environ={})
    exp = Path("/scratch/my exp")
    with pytest.raises(ConfigError) as info:
        site.render_batch_script(exp, 3, [PYTHON, "-m", "emews", "run", str(exp)])
    assert info.value.key == "--exp-dir" and "whitespace" in info.value.allowed


def test_slurm_output_keeps_a_percent_literal(in_tmp: Path) -> None:
    site = load_site("frontier", ["scheduler.account=A"], environ={})
    text = site.render_batch_script(Path("/scratch/100%"), 3, COMMAND)
    assert "#SBATCH --output=/scratch/100%%/job-%j.out" in text.splitlines()


def test_lsf_refuses_a_percent_in_the_output_path(in_tmp: Path) -> None:
    """bsub replaces %J (job id) and %I (array index) in -o and has no escape: EXP /scratch/run%J
    wrote the job's output to /scratch/run12345/job-12345.out, a folder that does not exist."""
    site = load_site("summit", ["scheduler.account=A"], environ={})
    with pytest.raises(ConfigError) as info:
        site.render_batch_script(Path("/scratch/run%J"), 3, COMMAND)
    assert info.value.key == "--exp-dir" and "%" in info.value.message and "%" in info.value.allowed


def test_only_an_lsf_site_with_csm_asks_for_nodes_with_nnodes(in_tmp: Path) -> None:
    """Every LSF site got '#BSUB -nnodes N', an option of IBM CSM's easy mode only (IBM Spectrum LSF
    10.1, bsub -nnodes: 'the number of compute nodes that are required for the CSM job'); a plain
    LSF cluster asks for slots: -n RANKS and span[ptile=RANKS_PER_NODE]. scheduler.csm says which."""
    (in_tmp / "plain.yaml").write_text("scheduler: {type: lsf, nodes: 2}\nlauncher: {type: mpiexec, workers_per_node: 3}\n")
    plain = load_site(str(in_tmp / "plain.yaml"), environ={}).render_batch_script(EXP_DIR, 7, COMMAND).splitlines()
    assert not [line for line in plain if "-nnodes" in line]
    assert "#BSUB -n 8" in plain and '#BSUB -R "span[ptile=4]"' in plain
    summit = load_site("summit", ["scheduler.account=A", "scheduler.nodes=2"], environ={})
    lines = summit.render_batch_script(EXP_DIR, 11, COMMAND).splitlines()
    assert "#BSUB -nnodes 2" in lines and not [line for line in lines if line.startswith("#BSUB -n ")]
    with pytest.raises(ConfigError) as info:
        load_site(str(in_tmp / "plain.yaml"), ["scheduler.csm=yes"], environ={})
    assert info.value.key == "scheduler.csm"


def test_missing_account_is_refused_before_rendering(in_tmp: Path) -> None:
    site = load_site("summit", environ={})
    with pytest.raises(ConfigError) as info:
        site.render_batch_script(EXP_DIR, 5, COMMAND)
    assert info.value.key == "scheduler.account"
    assert "EMEWS_ACCOUNT" in info.value.allowed
    assert load_site("summit", environ={"EMEWS_ACCOUNT": "P"}).render_batch_script(
        EXP_DIR, 5, COMMAND).count("#BSUB -P P") == 1
