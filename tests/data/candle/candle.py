"""The part of CANDLE's ``common/candle/__init__.py`` that NT3's parameter handling uses.

Ours, not copied: the real module also imports CANDLE's data, plotting and TensorFlow utilities,
which parsing does not need. The names below are the real ``default_utils`` ones, unchanged.
"""

from default_utils import ArgumentStruct, Benchmark, check_flag_conflicts, finalize_parameters, str2bool  # noqa: F401
