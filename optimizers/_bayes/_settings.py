"""What the engine's options allow and how many points it learns and picks per batch.

Kept apart from ``_engine`` so that the optimizer classes load without scikit-optimize,
scikit-learn and scipy: ``emews check`` and ``emews launch`` validate the options and compute
the width thresholds with these; the engine is imported where the model is built (``start``).
"""

from __future__ import annotations

ESTIMATORS = ("GP", "RF", "ET")
ACQ_FUNCS = ("EI", "PI", "LCB")
INITIAL_GENERATORS = ("random", "lhs", "sobol", "halton", "hammersly")
#: pending points a GP fit learns as lies; more pending: an evenly spaced subset of them
MAX_LIES = 64
#: picks per batch by constant liar; a larger batch's others are Thompson samples (``_thompson``)
LIAR_PICKS = 64
