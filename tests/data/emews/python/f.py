"""ga0's objective function (EQ-Py examples/ga0/swift/workflow.swift's task()), as a model program:
python3 f.py PARAM_LINE OUTPUT_FILE writes f(x, y) for PARAM_LINE "x,y" to OUTPUT_FILE."""
import sys
from math import cos, sin

x, y = (float(v) for v in sys.argv[1].split(","))
result = sin(4 * x) + sin(4 * y) + -2 * x + x**2 - 2 * y + y**2
with open(sys.argv[2], "w") as out:
    out.write(repr(result))
