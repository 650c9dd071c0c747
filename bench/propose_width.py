"""One model proposal at width (issue 27 item 3): the ``bayes`` engine (which ``hyperspace``
runs per subspace) in bench/scale.py's space, told ``--told`` results, with ``--pending``
points in flight, asked for ``--batch`` points; prints the seconds, the work (points the GP
was fitted on, lies, candidates, Thompson picks) and with ``--profile`` the ten most
expensive functions.

    python bench/propose_width.py --told 300 --pending 1000 --batch 100,1000 [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import random
import sys
import time
from pathlib import Path

import numpy as np

from emews.optimizers._bayes._engine import Engine
from emews.optimizers._bayes._space import SpaceMap

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale import SPACE  # noqa: E402  (the benchmark's space)


def loss(p: dict) -> float:
    return (np.log10(p["lr"]) + 3) ** 2 + (p["dropout"] - 0.2) ** 2 + ((p["units"] - 128) / 256) ** 2 + (p["act"] != "relu")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--told", type=int, default=300)
    ap.add_argument("--pending", default="1000", help="comma-separated")
    ap.add_argument("--batch", default="100,1000", help="comma-separated")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    for pending in map(int, args.pending.split(",")):
        for batch in map(int, args.batch.split(",")):
            smap, rng = SpaceMap(SPACE), random.Random(0)
            engine = Engine(smap, seed=1)
            points = [SPACE.sample(rng) for _ in range(args.told)]
            engine.tell([smap.to_skopt(p) for p in points], [loss(p) for p in points])
            engine.n_proposed = args.told
            out = [smap.to_skopt(SPACE.sample(rng)) for _ in range(pending)]
            engine.propose(2, out[:2])  # the first hyperparameter fit, not counted
            profile = cProfile.Profile()
            t0 = time.perf_counter()
            profile.enable()
            engine.propose(batch, out)
            profile.disable()
            work = getattr(engine, "last_work", {})
            print(f"told {args.told} pending {pending:,} batch {batch:,}: {time.perf_counter() - t0:.2f} s {work}",
                  flush=True)
            if args.profile:
                text = io.StringIO()
                pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(10)
                print(text.getvalue(), flush=True)


if __name__ == "__main__":
    main()
