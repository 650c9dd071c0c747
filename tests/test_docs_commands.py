"""The commands the README and docs/ show exist: every ``emews COMMAND`` in a console/bash block names a
subcommand, and every ``--option`` written after a subcommand (there or in a code span starting with
``emews``) is an option of that subcommand's parser (a renamed or removed option fails here, not in a
new user's first paste). Every relative link between them resolves, to a file and to a heading."""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import re
from pathlib import Path

from emews.cli import _parser
from testutil import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
#: where a command is written to be run: shell blocks, and code spans that start with ``emews``
_CODE = re.compile(r"```(?:console|bash|sh|shell)\n(.*?)```|`(emews [^`\n]+)`", re.S)
#: ``emews CMD ...`` up to the end of its line or a pipe between commands
_COMMAND = re.compile(r"(?:^|[\s$(;&])emews ([a-z][a-z-]*)((?:[^\n|;&]|\|(?=[a-z]))*)")
_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z-]*")


def subcommand_options() -> dict[str, set[str]]:
    """Each subcommand of ``emews`` and the options its parser accepts."""
    parser = _parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: {o for action in sub._actions for o in action.option_strings} for name, sub in subs.choices.items()}


def written_commands(path: Path) -> list[tuple[str, str, bool]]:
    """(subcommand, the rest of its line, whether in a shell block) for each ``emews CMD`` in ``path``'s code."""
    found = []
    for match in _CODE.finditer(path.read_text()):
        block = match.group(1) is not None
        found += [(m.group(1), m.group(2), block) for m in _COMMAND.finditer(match.group(1) or match.group(2))]
    return found


def test_every_emews_command_and_option_in_the_docs_exists() -> None:
    options = subcommand_options()
    wrong = []
    for path in DOCS:
        for command, rest, block in written_commands(path):
            if command not in options:
                wrong += [f"{path.name}: emews {command}: no such command"] if block else []
            else:
                wrong += [
                    f"{path.name}: emews {command} {o}: no such option"
                    for o in _OPTION.findall(rest)
                    if o not in options[command]
                ]
    assert wrong == []


def test_the_docs_show_commands_at_all() -> None:
    """The scan finds what it checks (a broken pattern would pass the test above vacuously)."""
    readme = written_commands(REPO / "README.md")
    assert ("launch", " random --site local --workers 3", True) in readme
    assert any(command == "report" and "--format" in rest for command, rest, _ in readme)


#: a relative Markdown link, ``[text](path#anchor)``
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _prose(path: Path) -> str:
    """``path``'s text without its fenced code blocks."""
    return re.sub(r"```.*?```", "", path.read_text(), flags=re.S)


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_between_the_docs_resolves() -> None:
    anchors = {p.resolve(): {_anchor(h) for h in re.findall(r"^#+\s+(.*)$", _prose(p), re.M)} for p in DOCS}
    broken = []
    for path in DOCS:
        for link in _LINK.findall(_prose(path)):
            if link.startswith(("http://", "https://", "mailto:")):
                continue
            target, _, anchor = link.partition("#")
            resolved = (path.parent / target).resolve() if target else path.resolve()
            if not resolved.exists():
                broken.append(f"{path.name}: {link}: no such file")
            elif anchor and resolved in anchors and anchor not in anchors[resolved]:
                broken.append(f"{path.name}: {link}: no such heading")
    assert broken == []


#: modules the docs' Python listings use by their usual names
_MODULES = {"json", "os", "sys", "time", "math", "random", "shutil", "subprocess", "pathlib", "emews", "np", "pd"}


def test_the_python_listings_import_the_modules_they_use() -> None:
    """A listing copied into a file runs without a NameError for a module it forgot to import
    (``json.dumps`` under ``import emews`` alone); placeholders such as ``build`` are left alone."""
    missing = []
    for path in DOCS:
        for block in re.findall(r"```python\n(.*?)```", path.read_text(), re.S):
            tree = ast.parse(block)
            imported = {
                alias.asname or alias.name.split(".")[0]
                for node in ast.walk(tree)
                if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in node.names
            }
            used = {
                node.value.id
                for node in ast.walk(tree)
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            }
            missing += [f"{path.name}: {block.splitlines()[0]}: {name}" for name in sorted(used & _MODULES - imported)]
    assert missing == []


def test_what_the_python_listings_take_from_emews_exists() -> None:
    """Every ``from emews... import NAME`` and ``emews.NAME`` in the docs' Python listings names something
    emews has (a renamed export fails here, not in a copied listing)."""
    import emews

    def exists(module: str, name: str) -> bool:
        if hasattr(importlib.import_module(module), name):
            return True
        return importlib.util.find_spec(f"{module}.{name}") is not None

    missing = []
    for path in DOCS:
        for block in re.findall(r"```python\n(.*?)```", path.read_text(), re.S):
            for node in ast.walk(ast.parse(block)):
                if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "emews":
                    missing += [
                        f"{path.name}: {node.module}.{a.name}" for a in node.names if not exists(node.module, a.name)
                    ]
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "emews":
                    missing += [] if exists("emews", node.attr) else [f"{path.name}: emews.{node.attr}"]
    assert emews.run and missing == []


#: ``emews launch WORKFLOW ... --site SITE ...`` on a line of a shell block (its comment cut off)
_BATCH_LAUNCH = re.compile(r"^(?:\$ )?emews launch (\S+)((?:(?!#).)*--site (?!local\b)[\w-]+(?:(?!#).)*)", re.M)


def batch_launches() -> list[tuple[str, str]]:
    """(file, the options) of every ``emews launch`` of the docs' shell blocks that names a batch site."""
    found = []
    for path in DOCS:
        for block in re.findall(r"```(?:console|bash|sh|shell)\n(.*?)```", path.read_text(), re.S):
            found += [(path.name, m.group(2).strip()) for m in _BATCH_LAUNCH.finditer(block)]
    return found


def test_every_batch_launch_in_the_docs_is_accepted_as_written(emews_cmd) -> None:
    """A user pastes a launch line onto a cluster's login node: its options (site, workers, nodes,
    pools, account) must fit that site as written. Each is run with ``--dry-run`` on the built-in
    ``random`` workflow in place of the user's (a ``--pools`` line with a PostgreSQL ``store.url``,
    which the dry run does not connect to)."""
    launches = batch_launches()
    assert len(launches) >= 4, launches  # the scan finds them (README, sites, coming-from-*, postgres)
    emews_cmd.env.pop("EMEWS_ACCOUNT", None)
    refused = []
    for name, options in launches:
        args = ["launch", "random", *options.split(), "--dry-run"]
        if "--pools" in options:
            args += ["--set", "store.url=postgresql://localhost/emews_docs"]
        proc = emews_cmd(*args)
        if proc.returncode != 0:
            refused.append(f"{name}: emews launch ... {options}: {proc.stderr.strip().splitlines()[-1:]}")
    assert refused == []


def test_the_reference_lists_every_command_with_every_option() -> None:
    """docs/workflow-reference.md's command table is the complete list: each command and each of its
    options (``emews checkpoints``, ``results --by-point``, ``resume --set`` were missing from it)."""
    reference = (REPO / "docs" / "workflow-reference.md").read_text()
    table = reference.split("## The command line", 1)[1].split("\n\n", 2)[1]
    rows = [row for row in table.splitlines() if row.startswith("| `emews ")]
    listed: dict[str, set[str]] = {}
    for row in rows:
        for command, rest in re.findall(r"`emews ([a-z][a-z-]*)([^`]*)`", row.split(" | ")[0]):
            listed.setdefault(command, set()).update(_OPTION.findall(rest))
    hidden = {"--help", "-h", "--job-exit", "--watch-start", "--lease", "--pool"}  # run's are emews' own
    missing = [
        f"emews {command} {option}" if option else f"emews {command}"
        for command, options in subcommand_options().items()
        for option in ([""] if command not in listed else []) + sorted(options - hidden - listed.get(command, set()))
    ]
    assert missing == []


def test_the_quickstart_prints_what_the_readme_shows(emews_cmd, tmp_path: Path) -> None:
    """The README's first command, run as written in an empty folder, prints the Quickstart's lines
    (the same best point: the search is seeded), its times and rates aside; the commands its table
    names next (status, results, report) then run on the experiment it made."""
    from test_readme import README, console_block

    shown = console_block("emews launch random --site local --workers 3", README)
    proc = emews_cmd("launch", "random", "--site", "local", "--workers", "3", timeout=300)
    assert proc.returncode == 0, proc.stderr
    said = proc.stderr.splitlines()
    said = [line for i, line in enumerate(said)  # a slow machine prints a progress line each 10 s: the last
            if " evaluations, " not in line or not any(" evaluations, " in later for later in said[i + 1:])]

    def masked(lines: list[str], home: str) -> list[str]:
        lines = [line.replace(home, "HOME") for line in lines]
        return [re.sub(r"[\d,.]+/s$", "N/s", re.sub(r" in [\d.]+ s$", " in T s", line)) for line in lines]

    assert masked(said, str(tmp_path)) == masked(shown, "/home/me"), proc.stderr
    exp = tmp_path / "experiments" / "random-001"
    for command in (["status"], ["results"], ["report"]):
        ran = emews_cmd(*command, str(exp), timeout=300)
        assert ran.returncode == 0, (command, ran.stderr)
    assert (exp / "report.html").is_file() and (exp / "results.csv").is_file()
