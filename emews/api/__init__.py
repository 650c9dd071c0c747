"""emews from Python: ``emews.run(...)`` runs a search as ``emews launch`` does, and
``emews.load(EXP)`` reads an experiment into DataFrames and figures (``emews.Experiment``).

``emews`` exposes these lazily (worker ranks import ``emews`` without pandas, pydantic or SQLite).
"""

from emews.api.starting import RunFailed, run
from emews.api.view import Experiment, load

__all__ = ["Experiment", "RunFailed", "load", "run"]
