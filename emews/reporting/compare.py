"""``emews report A B ...``: experiments of one search (two seeds, two optimizers) on one page.

One plot, the best so far of each experiment overlaid against evaluations and against wall time
(:func:`~emews.reporting.trajectory.best_so_far`, the single report's trajectory line), and a table
of each experiment's optimizer, evaluations, best and when it was found. The experiments must
optimize one metric in one direction: otherwise their curves are not comparable.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pandas as pd

from emews.core.errors import ConfigError
from emews.core.wording import duration
from emews.output.export import counts_text
from emews.reporting import summary
from emews.reporting.data import ExperimentData
from emews.reporting.figures import Plot, new_figure
from emews.reporting.trajectory import best_so_far, time_unit

#: the name of the comparison's plot (its PNG and section ``plot-compare``)
NAME = "compare"


def labels(experiments: Sequence[ExperimentData]) -> list[str]:
    """Each experiment's folder name, with as many parent folders as tell them apart."""
    parts = [e.exp_dir.parts for e in experiments]
    for depth in range(1, max(len(p) for p in parts) + 1):
        names = ["/".join(p[-depth:]) for p in parts]
        if len(set(names)) == len(names):
            return names
    return [str(e.exp_dir) for e in experiments]


def check_comparable(experiments: Sequence[ExperimentData]) -> None:
    """A :class:`ConfigError` naming the experiments when they optimize different metrics or directions."""
    kinds = {(e.metric, str(e.direction)) for e in experiments}
    if len(kinds) > 1:
        said = ", ".join(
            f"{name}: {e.metric} ({e.direction})" for name, e in zip(labels(experiments), experiments, strict=True)
        )
        raise ConfigError(
            f"the experiments optimize different metrics ({said}): their best-so-far curves are not comparable",
            key="exp_dir",
            allowed="experiments of one objective metric and direction",
        )


def overlay(experiments: Sequence[ExperimentData]) -> Plot:
    """The best so far of each experiment against evaluations and against wall time."""
    first = experiments[0]
    curves = [best_so_far(e) for e in experiments]
    longest = max((float(np.nanmax(c.when)) for c in curves if np.isfinite(c.when).any()), default=0.0)
    scale, unit = time_unit(longest)
    fig, (by_n, by_t) = new_figure(ncols=2, sharey=True)
    for name, curve in zip(labels(experiments), curves, strict=True):
        for ax, x in ((by_n, curve.n), (by_t, curve.when / scale)):
            finite = np.isfinite(curve.best) & np.isfinite(x)
            ax.step(x[finite], curve.best[finite], where="post", linewidth=1.5, label=name)
    by_n.set_xlabel("evaluations (in the order they finished)")
    by_t.set_xlabel(f"wall time since each experiment's first submission ({unit})")
    for ax in (by_n, by_t):
        ax.grid(alpha=0.3)
    by_n.set_ylabel(f"{first.metric} ({first.direction})")
    by_n.legend(loc="upper right", fontsize=8)
    fig.suptitle("Best so far, by experiment")
    return Plot(
        NAME,
        "Best so far, by experiment",
        fig,
        "One line per experiment: the best objective it had found after each evaluation (left) and at each "
        "moment of its runs (right); an experiment's line starts at its first success.",
    )


def table(experiments: Sequence[ExperimentData]) -> pd.DataFrame:
    """One row per experiment: optimizer, evaluations by status, best, and when it was found."""
    rows = []
    for name, data in zip(labels(experiments), experiments, strict=True):
        optimizer = data.workflow.get("optimizer", {})
        curve = best_so_far(data)
        finite = np.isfinite(curve.best)
        found = int(np.argmax(curve.best == curve.best[-1])) if finite.any() else None
        rows.append(
            {
                "experiment": name,
                "optimizer": f"{optimizer.get('name', '?')} {json.dumps(optimizer.get('options') or {}, sort_keys=True)}",
                "evaluations": f"{len(data.results)}: " + counts_text(summary.totals(data)),
                f"best {data.metric}": float(curve.best[-1]) if finite.any() else None,
                "found at evaluation": None if found is None else int(curve.n[found]),
                "found after": None if found is None else duration(float(curve.when[found])),
            }
        )
    return pd.DataFrame(rows)


def header(experiments: Sequence[ExperimentData]) -> list[tuple[str, str]]:
    first = experiments[0]
    return [
        ("experiments", ", ".join(str(e.exp_dir) for e in experiments)),
        ("metric", f"{first.metric} ({first.direction})"),
    ]
