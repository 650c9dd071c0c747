"""The facility's queue limits (``scheduler.limits``): a job its queue does not take (Polaris' and
Aurora's ``debug`` queue: 1-2 nodes for at most an hour; Frontier's ``batch`` partition: at most 2
hours below 92 nodes) was rendered and submitted as is, and qsub or sbatch rejected it after the
experiment was made; it is now one error line (exit 2) naming the key and what the queues take,
before anything is written or submitted."""

from __future__ import annotations

from pathlib import Path

import pytest

import emews.cli
from emews.core.errors import ConfigError
from emews.site import load_site
from site_helpers import FakeTools


@pytest.mark.parametrize(("site", "sets", "key", "allowed"), [
    ("polaris", ["scheduler.nodes=4"], "scheduler.nodes", "(allowed: 1..2 nodes, or another scheduler.queue: debug-scaling"),
    ("polaris", ["scheduler.walltime=02:00:00"], "scheduler.walltime", "(allowed: 00:05:00 to 01:00:00 at this node count"),
    ("polaris", ["scheduler.queue=prod", "scheduler.nodes=4"], "scheduler.nodes",
     "(allowed: 10..24 nodes or 25..99 nodes or 100..496 nodes"),
    ("aurora", ["scheduler.nodes=3"], "scheduler.nodes", "(allowed: 1..2 nodes"),
    ("frontier", ["scheduler.nodes=2", "scheduler.walltime=04:00:00"], "scheduler.walltime",
     "(allowed: up to 02:00:00 at this node count)"),
])
def test_a_job_its_queue_does_not_take_is_one_line_before_anything_is_written(
        in_tmp: Path, fake_tools: FakeTools, capsys: pytest.CaptureFixture[str],
        site: str, sets: list[str], key: str, allowed: str) -> None:
    given = [arg for item in ["scheduler.account=A", *sets] for arg in ("--set", item)]
    assert emews.cli.main(["launch", "random", "--site", site, *given, "--exp-dir", "exp"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"emews: error: --set: {key}: queue "), err
    assert "the scheduler would reject" in err and allowed in err and "\n" not in err, err
    assert not (in_tmp / "exp").exists() and fake_tools.calls("qsub") == []
    assert emews.cli.main(["check", "random", "--site", site, *given]) == 2  # check says the same


@pytest.mark.parametrize(("site", "sets"), [
    ("polaris", ["scheduler.nodes=2"]),
    ("polaris", ["scheduler.queue=prod", "scheduler.nodes=12", "scheduler.walltime=03:00:00"]),
    ("polaris", ["scheduler.queue=my-reservation", "scheduler.nodes=40"]),  # a queue not listed: not checked
    ("aurora", ["scheduler.queue=debug-scaling", "scheduler.nodes=8"]),
    ("frontier", ["scheduler.nodes=100", "scheduler.walltime=06:00:00"]),
])
def test_a_job_its_queue_takes_is_rendered(in_tmp: Path, site: str, sets: list[str]) -> None:
    loaded = load_site(site, ["scheduler.account=A", *sets], environ={})
    assert "#!/bin/bash" in loaded.render_batch_script(in_tmp / "exp", 1, ["true"])


@pytest.mark.parametrize("row", [
    {"nodes": [3, 1], "walltime": "01:00:00"},
    {"nodes": [1, 2], "walltime": ["02:00:00", "01:00:00"]},
    {"nodes": [1, 2], "walltime": "1 hour"},
])
def test_a_limit_that_is_not_a_range_is_refused(in_tmp: Path, row: dict) -> None:
    import yaml
    (in_tmp / "mine.yaml").write_text(yaml.safe_dump({"extends": "polaris", "scheduler": {"limits": {"debug": [row]}}}))
    with pytest.raises(ConfigError) as caught:
        load_site(str(in_tmp / "mine.yaml"), environ={})
    assert "scheduler.limits" in str(caught.value), caught.value
