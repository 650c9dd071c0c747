"""A gest-api generator's library is imported where the generator runs, not by every command: a
check that built the generator is kept (``emews.core.check_cache``), so the next ``emews check``,
``launch`` or ``resume`` of the same generator, options and space imports nothing (Xopt imports
PyTorch: seconds and ~700 MB per command), while the optimizer rank still builds and runs it. The
kept answer lasts while the user's modules the check loaded (the generator's file, the helper modules
it imports) are unchanged; ``EMEWS_CHECK_CACHE=`` keeps none, and a cache that cannot be read or
written never stops a check."""

from __future__ import annotations

import subprocess

import pytest

from testutil import stored_rows, write_workflow

pytest.importorskip("gest_api")

#: a generator whose module notes each import of it (in the file GEN_IMPORTS names)
GENERATOR = """
import os, random
from gest_api import Generator

with open(os.environ["GEN_IMPORTS"], "a") as notes:
    notes.write(f"{os.getpid()}\\n")


class Halves(Generator):
    def __init__(self, vocs):
        super().__init__(vocs)
        self.vocs = vocs

    def _validate_vocs(self, vocs):
        if any(name.startswith("bad") for name in vocs.variables):
            raise ValueError("Halves takes no variable named bad*")

    def suggest(self, num_points):
        return [{n: random.uniform(*v.domain) for n, v in self.vocs.variables.items()} for _ in range(num_points)]

    def ingest(self, results):
        pass
"""


#: the generator above, refusing the variables named with its helper module's PREFIX
HELPED = GENERATOR.replace("import os, random\n", "import os, random\nimport halves_rule\n").replace(
    'if any(name.startswith("bad") for name in vocs.variables):\n            raise ValueError("Halves takes no variable named bad*")',
    "if any(name.startswith(halves_rule.PREFIX) for name in vocs.variables):\n"
    '            raise ValueError(f"Halves takes no variable named {halves_rule.PREFIX}*")',
)
OPTIMIZER = {"name": "emews.contrib.gest:GestGenerator", "options": {"generator": "halves.py:Halves"}}
SPACE = {"x": {"type": "float", "lower": -1.0, "upper": 1.0}}


def _generator_workflow(emews_cmd, folder, generator: str = GENERATOR, cache: str | None = None):
    """``generator`` as halves.py, an objective and a workflow of them in ``folder``, the check cache
    in ``cache`` (default: folder/cache); the workflow and ``checked(workflow)``: ``emews check``'s
    process, asserted to exit 0, with the imports of the generator's module so far."""
    (folder / "halves.py").write_text(generator)
    imports = folder / "imports.txt"
    emews_cmd.env.update(
        {"GEN_IMPORTS": str(imports), "EMEWS_CHECK_CACHE": str(folder / "cache") if cache is None else cache}
    )
    (folder / "obj.py").write_text("def run(p):\n    return p['x'] ** 2\n")
    optimizer = {**OPTIMIZER, "options": {"generator": f"{folder / 'halves.py'}:Halves"}}
    wf = write_workflow(
        folder,
        optimizer=optimizer,
        objective={"module": "obj.py"},
        space=SPACE,
        budget={"evaluations": 3},
        task={"isolation": "inline"},
    )

    def checked(workflow) -> tuple[subprocess.CompletedProcess, list[str]]:
        proc = emews_cmd("check", str(workflow), timeout=300)
        assert proc.returncode == 0, proc.stderr
        return proc, imports.read_text().split() if imports.exists() else []

    return wf, checked


def test_a_passed_check_is_kept_until_the_generators_code_changes_and_a_refusal_never(emews_cmd, tmp_path) -> None:
    wf, checked_process = _generator_workflow(emews_cmd, tmp_path)
    gen, imports = tmp_path / "halves.py", tmp_path / "imports.txt"
    optimizer = {**OPTIMIZER, "options": {"generator": f"{gen}:Halves"}}
    space = SPACE

    def checked(workflow) -> list[str]:
        return checked_process(workflow)[1]

    assert len(checked(wf)) == 1  # built: the generator's module imported
    assert len(checked(wf)) == 1  # the same generator, options and space: nothing imported
    gen.write_text(GENERATOR + "# edited\n")
    assert len(checked(wf)) == 2  # its code changed: built again

    bad = write_workflow(
        tmp_path, name="bad", optimizer=optimizer, objective={"module": "obj.py"}, space={"bad_x": space["x"]}
    )
    for _ in range(2):  # a refusal is never kept
        proc = emews_cmd("check", str(bad), timeout=300)
        assert proc.returncode == 2 and "Halves takes no variable named bad*" in proc.stderr, proc.stderr
    missing = write_workflow(
        tmp_path,
        name="missing",
        objective={"module": "obj.py"},
        space=space,
        optimizer={**optimizer, "options": {"generator": f"{gen}:Thirds"}},
    )
    proc = emews_cmd("check", str(missing), timeout=300)  # imported where it is used: still refused by check
    assert proc.returncode == 2 and "has no class 'Thirds'" in proc.stderr, proc.stderr

    before = len(imports.read_text().split())
    proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert [r["status"] for r in stored_rows(tmp_path / "exp")] == ["ok"] * 3
    assert len(imports.read_text().split()) == before + 1  # the optimizer rank's, not the command's


def test_an_edited_helper_module_of_the_generator_is_checked_again(emews_cmd, tmp_path) -> None:
    """The generator's file is unchanged, the module it imports is not: the kept answer is not used."""
    (tmp_path / "halves_rule.py").write_text('PREFIX = "bad"\n')
    wf, checked = _generator_workflow(emews_cmd, tmp_path, HELPED)
    assert len(checked(wf)[1]) == 1
    assert len(checked(wf)[1]) == 1  # kept
    (tmp_path / "halves_rule.py").write_text('PREFIX = "x"\n')  # now the space's x is refused
    proc = emews_cmd("check", str(wf), timeout=300)
    assert proc.returncode == 2 and "Halves takes no variable named x*" in proc.stderr, proc.stderr


def test_checks_are_kept_nowhere_when_the_cache_is_empty_set_and_despite_a_cache_that_cannot_be_used(
    emews_cmd, tmp_path
) -> None:
    """``EMEWS_CHECK_CACHE=`` keeps nothing, silently; a cache folder that is a file keeps nothing and
    says so in one warning line per command; a kept answer overwritten with garbage is asked again and
    kept anew. Every check passes."""
    wf, checked = _generator_workflow(emews_cmd, tmp_path, cache="")
    for imported in (1, 2):
        proc, imports = checked(wf)
        assert len(imports) == imported and "warning" not in proc.stderr, proc.stderr

    (tmp_path / "not-a-folder").write_text("")
    emews_cmd.env["EMEWS_CHECK_CACHE"] = str(tmp_path / "not-a-folder")
    for imported in (3, 4):
        proc, imports = checked(wf)
        assert len(imports) == imported, proc.stderr
        warnings = [line for line in proc.stderr.splitlines() if "warning" in line]
        assert len(warnings) == 1, proc.stderr
        assert warnings[0].startswith(f"emews: warning: cannot keep checks in {tmp_path / 'not-a-folder'} ("), warnings
        assert warnings[0].endswith(
            "): each command checks afresh (set EMEWS_CHECK_CACHE to a folder you can write, or empty to keep none)"
        ), warnings

    emews_cmd.env["EMEWS_CHECK_CACHE"] = str(tmp_path / "cache")
    assert len(checked(wf)[1]) == 5  # built, kept
    (kept,) = (tmp_path / "cache").iterdir()
    kept.write_bytes(b"\x00{not json")
    assert len(checked(wf)[1]) == 6  # unreadable: built again, and kept anew
    assert len(checked(wf)[1]) == 6
