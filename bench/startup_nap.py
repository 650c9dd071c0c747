"""The objective of ``bench/startup.py``: sleeps ``EMEWS_BENCH_NAP`` seconds. A module of its own,
importing nothing else, so that the files a worker opens are emews' and not the benchmark's."""

import os
import time


def nap(params: dict) -> float:
    time.sleep(float(os.environ.get("EMEWS_BENCH_NAP", "0.2")))
    return params["x"]
