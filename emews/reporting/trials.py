"""Training trials in ``emews status``: how many reported and how those that ended did (stopped
early, completed, failed), how many are paused (or interrupted: the run is over and they had not
ended), and where the trials that have not ended stand (their last step and metric)."""

from __future__ import annotations

from collections import Counter

from emews.core.wording import counted
from emews.output.numbers import number
from emews.store import Store, TrialState
from emews.training.messages import endings_text

#: at most this many trials that have not ended are listed
LISTED = 10


def trial_lines(store: Store | None, metric: str, live: bool = True) -> list[str]:
    """Status lines about the training trials of the experiment's ``store``, open (none when no task
    reported, or nothing is stored yet); ``live``: whether the run goes on (else a trial that has not
    ended and is not paused was interrupted: its job is gone, killed or crashed, and nothing trains it)."""
    if store is None:
        return []
    states = store.trial_states()
    if not states:
        return []
    finished = store.finished_ids()
    endings = store.endings()
    # for a walltime, or for a promotion (none since it began to wait: a promoted trial runs)
    paused = set(store.pauses()) | {t for t, state in states.items() if state.released}
    open_ = [s for s in states.values() if s.trial not in finished]
    ended = len(states) - len(open_)
    failed = ended - len(endings)
    how = ", ".join(
        part
        for part in (endings_text(Counter(e.value for e in endings.values())), f"{failed} failed" if failed else "")
        if part
    )
    waits = [s for s in open_ if s.trial in paused and s.action == "pause"]
    cut = [] if live else [s for s in open_ if s not in waits]
    lines = [
        f"training: {counted(len(states), 'trial')} reported; {ended} ended"
        + (f" ({how})" if how else "")
        + f", {len(open_) - len(waits) - len(cut)} running, {len(waits)} paused"
        + (f", {len(cut)} interrupted" if cut else "")
        + (f" ({'the run is not running; ' if cut else ''}emews resume continues them)" if waits or cut else "")
    ]
    for state in open_[-LISTED:]:
        lines.append(
            f"  trial {state.trial}: step {state.step}, {metric} {_value(state, metric)}"
            + (", paused" if state in waits else ", interrupted" if state in cut else "")
        )
    return lines


def _value(state: TrialState, metric: str) -> str:
    value = state.metrics.get(metric)
    return number(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else "-"
