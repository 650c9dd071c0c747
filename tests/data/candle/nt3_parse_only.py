#!/usr/bin/env python3
"""NT3 with its real parameter handling and no network (ours, for the tests).

``initialize_parameters`` is NT3's own (``Pilot1/NT3/nt3_baseline_keras2.py``): CANDLE's parser
(``parse_args``, ``str2bool``, nargs lists, the required keys) over ``nt3.py``'s definitions and
a default model file, or the one ``--config_file`` names. Instead of training, it prints the
parameters it parsed and its argv as one JSON line with a ``val_loss`` computed from them.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

import candle  # noqa: E402
import nt3 as bmk  # noqa: E402

DEFAULT_MODEL = os.path.join("..", "supervisor", "nt3_default_model.txt")


def initialize_parameters(default_model=DEFAULT_MODEL):
    # Build benchmark object
    nt3Bmk = bmk.BenchmarkNT3(
        bmk.file_path,
        default_model,
        'keras',
        prog='nt3_baseline',
        desc='1D CNN to classify RNA sequence data in normal or tumor classes')

    # Initialize parameters
    gParameters = candle.finalize_parameters(nt3Bmk)

    return gParameters


def main():
    params = initialize_parameters()
    loss = params["learning_rate"] * sum(params["dense"]) + params["epochs"] / 1000
    print(json.dumps({"val_loss": loss, "argv": sys.argv[1:], "parsed": params}, default=str))


if __name__ == "__main__":
    main()
