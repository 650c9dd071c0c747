"""A gest-api generator's library is imported where the generator runs, not by every command: a
check that built the generator is kept (``emews.core.check_cache``), so the next ``emews check``,
``launch`` or ``resume`` of the same generator code, options and space imports nothing (Xopt imports
PyTorch: seconds and ~700 MB per command), while the optimizer rank still builds and runs it."""

from __future__ import annotations

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


def test_a_passed_check_is_kept_until_the_generators_code_changes_and_a_refusal_never(emews_cmd, tmp_path) -> None:
    gen = tmp_path / "halves.py"
    gen.write_text(GENERATOR)
    imports = tmp_path / "imports.txt"
    emews_cmd.env.update({"GEN_IMPORTS": str(imports), "EMEWS_CHECK_CACHE": str(tmp_path / "cache")})
    (tmp_path / "obj.py").write_text("def run(p):\n    return p['x'] ** 2\n")
    optimizer = {"name": "emews.contrib.gest:GestGenerator", "options": {"generator": f"{gen}:Halves"}}
    space = {"x": {"type": "float", "lower": -1.0, "upper": 1.0}}
    wf = write_workflow(
        tmp_path,
        optimizer=optimizer,
        objective={"module": "obj.py"},
        space=space,
        budget={"evaluations": 3},
        task={"isolation": "inline"},
    )

    def checked(workflow) -> list[str]:
        proc = emews_cmd("check", str(workflow), timeout=300)
        assert proc.returncode == 0, proc.stderr
        return imports.read_text().split() if imports.exists() else []

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
