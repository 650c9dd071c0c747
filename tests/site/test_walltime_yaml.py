"""Walltime parsing/formatting and the YAML 1.2 number rules of site files."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emews.core.errors import ConfigError
from emews.config.yamlio import parse_yaml
from emews.site.walltime import format_hm, format_hms, parse_walltime

hours = st.integers(0, 500)
sixty = st.integers(0, 59)


@given(hours, sixty, sixty)
def test_hms_parses_to_seconds_and_back(h: int, m: int, s: int) -> None:
    total = h * 3600 + m * 60 + s
    text = f"{h}:{m:02d}:{s:02d}"
    if total == 0:
        with pytest.raises(ValueError):
            parse_walltime(text)
        return
    assert parse_walltime(text) == total
    assert parse_walltime(format_hms(total)) == total


@given(hours, sixty)
def test_hh_mm_is_hours_and_minutes(h: int, m: int) -> None:
    if h == m == 0:
        return
    assert parse_walltime(f"{h:02d}:{m:02d}") == h * 3600 + m * 60


@given(st.integers(1, 10**6))
def test_lsf_format_rounds_up_to_the_minute(seconds: int) -> None:
    hh, mm = format_hm(seconds).split(":")
    minutes = int(hh) * 60 + int(mm)
    assert minutes * 60 >= seconds > (minutes - 1) * 60


@pytest.mark.parametrize("bad", ["", "1", "1:60", "1:00:60", "-1:00", "1h", "01:00:00:00",
                                 "0:00", "0:00:00", "a:b"])
def test_malformed_walltimes_are_rejected(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_walltime(bad)


def test_yaml_keeps_walltimes_as_strings_and_reads_1e_minus_5_as_float() -> None:
    data = parse_yaml("a: 1:00:00\nb: 1e-5\nc: 010\nd: 12\ne: 0x1f\nf: 2.5\ng: true\n", source="x")
    assert data == {"a": "1:00:00", "b": 1e-5, "c": "010", "d": 12, "e": 31, "f": 2.5, "g": True}


def test_only_true_and_false_are_booleans_and_the_dumper_quotes_the_words_yaml_1_1_read_so(tmp_path) -> None:
    """A categorical ``values: [yes, no]`` reached the objective as True and False (YAML 1.1), and
    ``[yes, no, on]`` was refused as a repeat."""
    from emews.config.workflow import load_workflow
    from emews.config.yamlio import dump_yaml

    data = parse_yaml("values: [yes, no, on, off, Yes, true, False]\n", source="x")
    assert data == {"values": ["yes", "no", "on", "off", "Yes", True, False]}
    text = dump_yaml(data)
    assert "'yes'" in text and "'off'" in text and parse_yaml(text, source="y") == data
    wf = tmp_path / "wf.yaml"
    wf.write_text("objective: {module: m.py}\noptimizer: {name: random}\n"
                  "space: {opt: {type: categorical, values: [adam, off, on]}}\nbudget: {evaluations: 3}\n")
    (tmp_path / "m.py").write_text("def run(p):\n    return 1.0\n")
    assert tuple(load_workflow(str(wf)).space["opt"].values) == ("adam", "off", "on")


def test_malformed_yaml_names_source_and_line() -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml("a: 1\nb: [1, 2\nc: 3\n", source="sites/x.yaml")
    assert info.value.file == "sites/x.yaml"
    assert "line " in str(info.value)
