"""The workflow keys the docs name and the keys the validator accepts are the same: every top-level key
is in docs/workflow-reference.md, every key of a section is documented somewhere in README.md or
docs/, and every ``section.key`` the docs write is a key the validator accepts."""

from __future__ import annotations

import re

from pydantic import BaseModel

from emews.config.workflow_schema import WorkflowModel
from testutil import REPO

DOCS = "".join(p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))])
REFERENCE = (REPO / "docs" / "workflow-reference.md").read_text()


def reference_entries(reference: str) -> set[str]:
    """The keys the reference's "The workflow file" section enters: each bullet of its list starts with
    the key it is about, in backticks as ``key``, ``key: ...`` or ``key.sub`` (``- `a` and `b` ...``: two)."""
    section = reference.split("\n## The workflow file\n", 1)[1].split("\n## ", 1)[0]
    return {key for pair in re.findall(r"^- `(\w+)(?:` and `(\w+))?[.:`]", section, re.M) for key in pair if key}


def sections() -> dict[str, type[BaseModel]]:
    """The workflow's sections that are mappings of fixed keys (``task``, ``budget``, ...)."""
    found = {}
    for name, field in WorkflowModel.model_fields.items():
        for kind in (field.annotation, *getattr(field.annotation, "__args__", ())):
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                found[name] = kind
    return found


def test_every_top_level_key_is_in_the_workflow_reference() -> None:
    entries = reference_entries(REFERENCE)
    missing = [key for key in WorkflowModel.model_fields if key not in entries]
    assert missing == []
    # a key named only inside another key's entry or elsewhere (an option's ``seed: 1``) is not entered
    assert "seed" not in reference_entries(REFERENCE.replace("- `seed` (optional", "- Optional"))


def test_every_key_of_a_section_is_documented() -> None:
    assert {"task", "budget", "store", "walltime", "objective", "checkpoints"} <= set(sections())
    missing = [
        f"{section}.{key}"
        for section, model in sections().items()
        for key in model.model_fields
        if not re.search(rf"`{section}\.{key}\b|`{key}`|\b{key}:", DOCS)
    ]
    assert missing == []


def test_every_section_key_the_docs_write_is_accepted() -> None:
    known = sections()
    written = set(re.findall(rf"`(?:--set )?({'|'.join(known)})\.([a-z_]+)\b(?!\()", DOCS))
    assert written, "the pattern finds the docs' keys"
    unknown = [f"{section}.{key}" for section, key in sorted(written) if key not in known[section].model_fields]
    assert unknown == []
