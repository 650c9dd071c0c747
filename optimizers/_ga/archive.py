"""Saving the final population and hall of fame as JSON in the experiment directory."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .individual import Individual, to_record

POPULATION_FILE = "ga_population.json"
HALL_OF_FAME_FILE = "ga_hall_of_fame.json"


def save(
    population: Sequence[Individual], hall_of_fame: Sequence[Individual], exp_dir: str | os.PathLike[str] | None
) -> list[Path]:
    """Write both files into ``exp_dir`` (atomically); without one, write nothing."""
    if exp_dir is None:
        return []
    root = Path(exp_dir)
    root.mkdir(parents=True, exist_ok=True)
    written = []
    for name, individuals in ((POPULATION_FILE, population), (HALL_OF_FAME_FILE, hall_of_fame)):
        path = root / name
        tmp = path.with_suffix(".json.tmp")
        records = [json_safe(to_record(i)) for i in individuals]
        tmp.write_text(json.dumps(records, indent=2, allow_nan=False, default=repr) + "\n")
        tmp.replace(path)
        written.append(path)
    return written


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float (which strict JSON cannot hold) as a string: ``"inf"``."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
