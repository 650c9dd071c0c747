"""Saving the final population and hall of fame as JSON in the experiment directory."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Sequence

from .individual import Individual, to_record

POPULATION_FILE = "ga_population.json"
HALL_OF_FAME_FILE = "ga_hall_of_fame.json"
EXP_DIR_ENV = "EMEWS_EXP_DIR"


def save(population: Sequence[Individual], hall_of_fame: Sequence[Individual],
         exp_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """Write both files into ``exp_dir`` (default: ``$EMEWS_EXP_DIR``); without one, write nothing."""
    exp_dir = exp_dir if exp_dir is not None else os.environ.get(EXP_DIR_ENV)
    if not exp_dir:
        return []
    root = Path(exp_dir)
    root.mkdir(parents=True, exist_ok=True)
    written = []
    for name, individuals in ((POPULATION_FILE, population), (HALL_OF_FAME_FILE, hall_of_fame)):
        path = root / name
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps([to_record(i) for i in individuals], indent=2, allow_nan=False) + "\n")
        tmp.replace(path)
        written.append(path)
    return written
