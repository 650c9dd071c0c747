"""What code a kept check depended on (emews.core.code_files): the user's modules loaded in this
process, not the standard library's, an installed package's or emews' own; a fingerprint that changes
with a file's text and a folder's entries."""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path

import pytest

import emews.core.space
from emews.core.code_files import ABSENT, fingerprint, is_installed, user_module_files


def test_the_users_modules_are_those_loaded_from_outside_the_installation_and_emews(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "emews_test_helper_module.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "emews_test_helper_module", raising=False)
    importlib.import_module("emews_test_helper_module")
    files = user_module_files()
    assert (tmp_path / "emews_test_helper_module.py").resolve() in files
    assert Path(json.__file__).resolve() not in files  # the standard library
    assert Path(pytest.__file__).resolve() not in files  # site-packages
    assert Path(emews.core.space.__file__).resolve() not in files  # emews' own
    assert not is_installed(Path(sys.prefix) / "src" / "app" / "model.py")  # a project under the prefix: the user's


def test_a_fingerprint_changes_with_a_files_text_and_a_folders_entries(tmp_path: Path) -> None:
    file, folder = tmp_path / "a.R", tmp_path / "library"
    file.write_text("x <- 1\n")
    folder.mkdir()
    os.utime(folder, ns=(10**18, 10**18))  # made long ago (timestamps are coarser than a test's steps)
    before = fingerprint(file), fingerprint(folder)
    file.write_text("x <- 2\n")
    (folder / "newpkg").mkdir()
    after = fingerprint(file), fingerprint(folder)
    assert before[0] != after[0] and before[1] != after[1]
    assert fingerprint(tmp_path / "missing") == ABSENT
