#!/usr/bin/env python3
"""A model that writes and checkpoints where CANDLE's library (``candle``, ECP-CANDLE/candle_lib,
which Benchmarks' models import since 2022) puts them, for tests; ours, no CANDLE code.

As candle_lib does: the parameters are the ``--config_file`` ``[Global_Params]`` file (values
``eval``-ed: Python literals here) with ``--run_id`` / ``--experiment_id`` over them; the output dir
is ``$CANDLE_OUTPUT_DIR`` (else ``$CANDLE_DATA_DIR``) ``/MODEL_NAME/OUTPUT_DIR/EXPERIMENT_ID/RUN_ID``
(``directory_tree_from_parameters``); checkpoints go to ``OUTPUT/ckpts/epochs/NNN`` (``model.h5`` and
``ckpt-info.json``, written in ``ckpts/work`` and renamed) with ``ckpts/last`` and ``ckpts/best`` linking
the newest by its absolute path (``CandleCkpt.ckpt_epoch``, ``CandleCkptPyTorch``), and with
``ckpt_restart_mode = 'auto'`` training restarts after the epoch ``ckpts/last`` holds, a ``model.h5``
there without its ``ckpt-info.json`` an error (``CandleCkpt.restart``, ``restart_json``; NT3's ``initial_epoch``).
Each epoch appends a row to ``OUTPUT/training.log`` (Keras' ``CSVLogger``), prints a Keras-like
line and appends ``RUN_ID EPOCH`` to the ``events`` file; after epoch ``hold_after`` it waits for
the ``gate`` file (:data:`GATE_WAIT` seconds at most).
"""

import argparse
import ast
import configparser
import json
import os
import time
from pathlib import Path


#: how long it waits for the gate at most: a test that failed before opening it leaves no process behind
GATE_WAIT = 900


def parameters() -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config_file", required=True)
    parser.add_argument("--experiment_id", default="EXP000")
    parser.add_argument("--run_id", default="RUN000")
    parser.add_argument("--ckpt_save_interval", type=int, default=None)  # one of CANDLE's own options
    args = parser.parse_args()
    config = configparser.ConfigParser()
    config.read(args.config_file)
    params = {key: ast.literal_eval(value) for key, value in config["Global_Params"].items()}
    params.update(experiment_id=args.experiment_id, run_id=args.run_id)
    if args.ckpt_save_interval is not None:
        params["ckpt_save_interval"] = args.ckpt_save_interval
    return params


def output_dir(params: dict) -> Path:
    root = os.environ.get("CANDLE_OUTPUT_DIR") or os.environ["CANDLE_DATA_DIR"]
    path = Path(root, params["model_name"], params.get("output_dir") or "Output", params["experiment_id"], params["run_id"])
    path = Path(os.path.abspath(path))
    path.mkdir(parents=True, exist_ok=True)
    return path


def checkpoint(ckpts: Path, epoch: int, val_loss: float) -> None:
    """As ``CandleCkpt.ckpt_epoch``: ``ckpts/work`` written and renamed ``ckpts/epochs/NNN``, then
    ``ckpts/best`` and ``ckpts/last`` removed and linked to its resolved path."""
    root = ckpts.resolve()
    work, this = root / "work", root / "epochs" / f"{epoch:03d}"
    work.mkdir(parents=True, exist_ok=True)
    (work / "model.h5").write_text(json.dumps({"epoch": epoch}))
    (work / "ckpt-info.json").write_text(json.dumps({"epoch": epoch, "best_metric_last": val_loss}) + "\n")
    this.parent.mkdir(exist_ok=True)
    os.rename(work, this)
    for link in (root / "best", root / "last"):
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(this, link)


def restart(ckpts: Path) -> int:
    """As ``CandleCkpt.restart`` under ``auto``: the epoch ``ckpts/last`` holds, 0 without a model there."""
    last = f"{ckpts}/last"
    if not os.path.exists(last + "/model.h5"):
        return 0
    print(f"restarting: '{last}/model.h5'", flush=True)
    if not os.path.exists(last + "/ckpt-info.json"):
        raise Exception(f"restart_json(): in: '{last}' model exists but not json!")
    with open(last + "/ckpt-info.json") as fh:
        return json.load(fh)["epoch"]


def main() -> None:
    params = parameters()
    out = output_dir(params)
    ckpts = out / "ckpts"
    start = restart(ckpts) if params.get("ckpt_restart_mode") == "auto" else 0
    if start:
        print(f"restarting from ckpt: initial_epoch: {start}", flush=True)
    log = out / "training.log"
    if start == 0 or not log.is_file():
        log.write_text("epoch,val_loss\n")
    for epoch in range(start + 1, int(params["epochs"]) + 1):
        val_loss = 1.0 / epoch
        with log.open("a") as fh:
            fh.write(f"{epoch - 1},{val_loss}\n")
        if params.get("ckpt_save_interval"):
            checkpoint(ckpts, epoch, val_loss)
        print(f"1/1 - 0s - loss: {val_loss} - val_loss: {val_loss}", flush=True)
        with open(params["events"], "a") as fh:
            fh.write(f"{params['run_id']} {epoch}\n")
        if epoch == params.get("hold_after"):
            waited = time.monotonic()
            while not os.path.exists(params["gate"]):
                if time.monotonic() - waited > GATE_WAIT:
                    raise SystemExit(f"no gate {params['gate']} after {GATE_WAIT} s (the test ended?)")
                time.sleep(0.05)


if __name__ == "__main__":
    main()
