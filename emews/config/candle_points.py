"""The values of a points file (Supervisor's UPF) that a CANDLE model run as a command
(``params: candle``) would not read as meant: a Python expression as text (``"batch_size": "2**4"``),
which the model would get as that text, refused by ``emews check`` as the same value in the space is."""

from __future__ import annotations

from emews.core.errors import ConfigError
from emews.core.optimizer import Optimizer
from emews.objective.candle_params import expression_problem

#: the key a points file is named by in a workflow
POINTS_KEY = "optimizer.options.file"
#: a UPF line's key that is bookkeeping, never a value the model reads (``{id}`` passes it as written)
ID_KEY = "id"
#: the problems listed at most (the first of each line and key, in file order)
LISTED = 10


def check_candle_points(optimizer: Optimizer, file: str) -> None:
    """Raise a :class:`ConfigError` naming ``FILE:LINE``, the key and the value to write for each
    value of the optimizer's written points that is a Python expression as text (up to
    :data:`LISTED`, with how many more there are)."""
    problems: list[ConfigError] = []
    found = 0
    for where, point in optimizer.written_points():
        for key, value in point.items():
            problem = None if key == ID_KEY else expression_problem(value, syntax="JSON")
            if problem is None:
                continue
            found += 1
            if len(problems) < LISTED:
                problems.append(ConfigError(f"{where}: {key}: {problem}", file=file, key=POINTS_KEY))
    if not problems:
        return
    if found > len(problems):
        last = problems[-1]
        problems[-1] = ConfigError(
            f"{last.message} ({found - len(problems)} more values like these in the file)", file=file, key=POINTS_KEY
        )
    raise ConfigError.together(problems)
