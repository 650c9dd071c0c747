"""Numbers as `emews status`, the end-of-run summary and the report print them: integers as integers
(1234567, not 1.23457e+06), other numbers to a few significant digits."""

from __future__ import annotations

import math
from numbers import Integral, Real

#: integral floats up to this magnitude print as integers (beyond it a float holds no exact integer)
EXACT_INTEGERS = 2.0**53


def number(value: object, digits: int = 6) -> str:
    """``value`` as text: an integer (or an integral float a store kept as REAL) in full, another
    real number to ``digits`` significant digits; anything else as ``str`` would."""
    if isinstance(value, bool) or not isinstance(value, Real):
        return str(value)
    if isinstance(value, Integral):
        return str(int(value))
    real = float(value)
    if math.isfinite(real) and real.is_integer() and abs(real) <= EXACT_INTEGERS:
        return str(int(real))
    return f"{real:.{digits}g}"
