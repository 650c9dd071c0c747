#!/usr/bin/env python3
"""A CANDLE-style command-line model for tests: argparse flags in, a result out, misbehaviour on demand.

Its loss is ``x**2 + epochs / 100`` (plus one per dense layer when ``--use_bn`` is given), so a test
can compute what each evaluation must report. ``--mode`` picks how it reports or fails.
Parameters may also come from a JSON/YAML file (``--params FILE``) or from the environment (``--from-env``).
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time


def arguments() -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--x", type=float, default=0.0)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--dense", type=int, nargs="+", default=[])
    parser.add_argument("--use_bn", action="store_true")
    parser.add_argument("--activation", default="relu")
    parser.add_argument("--mode", default="stdout")
    parser.add_argument("--output_dir", default=None)
    parser.add_argument("--params", default=None)
    parser.add_argument("--from-env", action="store_true")
    args, _ = parser.parse_known_args()
    params = vars(args)
    if args.params:
        with open(args.params) as fh:
            if args.params.endswith(".json"):
                params.update(json.load(fh))
            else:
                import yaml
                params.update(yaml.safe_load(fh))
    if args.from_env:
        for name in ("x", "epochs", "mode"):
            if name in os.environ:
                params[name] = os.environ[name] if name == "mode" else json.loads(os.environ[name])
    return params


def main() -> None:
    p = arguments()
    loss = float(p["x"]) ** 2 + int(p["epochs"]) / 100 + (len(p["dense"]) if p["use_bn"] else 0)
    mode = p["mode"]
    print(f"epoch 1/1 - loss: {loss + 1}  (a progress line, not the result)")
    echo = {"seen": {k: p[k] for k in ("x", "epochs", "dense", "use_bn", "activation")},
            "seed": os.environ.get("EMEWS_SEED"), "cwd": os.getcwd()}
    if mode == "stdout":
        print(f"loss {loss}")
    elif mode == "json":
        print(json.dumps({"loss": loss, "accuracy": 0.5, **echo}))
    elif mode == "file":
        with open("result.json", "w") as fh:
            json.dump({"loss": loss, **echo}, fh)
    elif mode == "candle":
        with open(os.path.join(p["output_dir"], "result.txt"), "w") as fh:
            fh.write(f"{loss}\n")
    elif mode == "fail":
        print("fatal: data not found", file=sys.stderr)
        sys.exit(3)
    elif mode == "segv":
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGSEGV)
    elif mode == "noresult":
        print("training done")
    elif mode == "hang":
        # a grandchild in a session of its own, as container runtimes and launchers start them
        subprocess.Popen(["setsid", "sleep", "3600"])
        with open("hanging", "w") as fh:
            fh.write(str(os.getpid()))
        time.sleep(3600)


if __name__ == "__main__":
    main()
