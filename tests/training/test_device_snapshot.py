"""Checkpoints of device tensors: copied to host buffers, the writer waiting for the copy's event.

Here (no GPU) a copier that copies on the CPU stands in for CUDA's, with an event the test
completes; the CUDA test runs the real path where a GPU is present (``bench/gpu_check.py`` too).
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import textwrap
import threading
from importlib.util import find_spec
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from emews.training import device_snapshot
from emews.training.checkpoints import (
    KIND_OBJECT,
    CheckpointWriter,
    frame,
    framed_size,
    read_checkpoint,
    snapshot,
    write_atomic,
)
from emews.training.device_snapshot import DeviceSnapshot, PinnedPool, device_tensors

# torch is looked up at collection and imported by the first test that runs: collecting this file
# (every pytest process does, each xdist worker) need not import it (3-4 s of CPU)
pytestmark = pytest.mark.skipif(find_spec("torch") is None, reason="the test extra installs torch")
torch: Any = None  # the module, once :func:`_torch` ran


@pytest.fixture(autouse=True)
def _torch() -> None:
    global torch
    import torch as module

    torch = module


def _cuda() -> bool:
    """Whether torch sees a CUDA GPU (a skip condition evaluated when the test runs)."""
    import torch as module

    return bool(module.cuda.is_available())


class _Pair(NamedTuple):
    left: Any
    right: Any


class _Opaque:
    def __init__(self, tensor: Any) -> None:
        self.tensor = tensor


class _Done:
    def synchronize(self) -> None:
        pass


class _CpuCopier:
    """CUDA's copier on the CPU: copies at once into reused (unpinned) buffers; ``event`` given."""

    def __init__(self, event: Any = None, fill_on_sync: bool = False) -> None:
        self.pool = PinnedPool(torch, pin=False)
        self.event = event or _Done()
        self.fill_on_sync = fill_on_sync
        self.sources: list[Any] = []
        self.given_back: list[list[Any]] = []

    def copy(self, tensors: list[Any]) -> tuple[list[Any], list[Any]]:
        self.pool.begin()
        host = [self.pool.take(t.shape, t.dtype) for t in tensors]
        self.sources = [t.clone() for t in tensors]  # what the device held at the report
        for buffer, source in zip(host, self.sources, strict=True):
            if self.fill_on_sync:
                buffer.zero_()  # the copy has not happened yet
            else:
                buffer.copy_(source)
        self.host = host
        return host, [self.event]

    def complete(self) -> None:
        for buffer, source in zip(self.host, self.sources, strict=True):
            buffer.copy_(source)

    def give_back(self, host: list[Any]) -> None:
        self.given_back.append(host)
        self.pool.give(host)


def _every(tensor: Any) -> bool:
    return True


def _same_bits(a: Any, b: Any) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.reshape(-1).view(torch.uint8),
                                                                     b.reshape(-1).view(torch.uint8))


def _odd_values() -> Any:
    return torch.tensor([float("nan"), -0.0, float("inf"), 1e-45, 3.0])


def test_the_walk_finds_nested_tensors_once_and_not_inside_objects() -> None:
    a, b, c, hidden = torch.ones(2), torch.zeros(3), torch.arange(4), torch.ones(1)
    loop: list[Any] = [a]
    loop.append(loop)
    checkpoint = {"model": collections.OrderedDict(w=a), "opt": {"state": {0: {"m": [b, (c, a)]}}},
                  "pair": _Pair(c, 7), "loop": loop, "other": _Opaque(hidden), "n": 3}
    found = list(device_tensors(checkpoint, torch, _every))
    assert sorted(id(t) for t in found) == sorted(id(t) for t in (a, b, c))
    assert list(device_tensors(checkpoint, torch)) == []  # CPU tensors are not on a device


def test_a_device_snapshot_keeps_the_structure(tmp_path: Path) -> None:
    shared = torch.randn(3, 4)
    model = torch.nn.Linear(4, 2)
    checkpoint = {"model": model.state_dict(), "shared": [shared, shared], "pair": _Pair(shared, "x"),
                  "half": torch.randn(5, dtype=torch.bfloat16), "empty": torch.zeros(0, 2), "scalar": torch.tensor(7),
                  "param": torch.nn.Parameter(torch.ones(2)), "other": _Opaque(torch.ones(1)), "step": 12}
    snap = device_snapshot.take(checkpoint, copier=_CpuCopier(), on_device=_every)
    assert isinstance(snap, DeviceSnapshot) and len(snap.host) == 8  # ``shared`` once; the opaque one too
    write_atomic(tmp_path / "a.ckpt", frame(KIND_OBJECT, snap))
    assert (tmp_path / "a.ckpt").stat().st_size == framed_size(KIND_OBJECT, snap)
    back = read_checkpoint(tmp_path / "a.ckpt")
    assert type(back["model"]) is collections.OrderedDict and list(back["model"]) == ["weight", "bias"]
    assert _same_bits(back["model"]["weight"], model.weight.detach())
    assert back["shared"][0] is back["shared"][1] is back["pair"].left and isinstance(back["pair"], _Pair)
    assert _same_bits(back["shared"][0], shared) and _same_bits(back["half"], checkpoint["half"])
    assert back["empty"].shape == (0, 2) and back["scalar"].shape == () and int(back["scalar"]) == 7
    assert isinstance(back["param"], torch.nn.Parameter) and back["param"].requires_grad
    assert back["other"].tensor.tolist() == [1.0] and back["step"] == 12


@pytest.mark.parametrize("path", ["plain", "device"])
def test_cpu_tensors_round_trip_bit_identically(tmp_path: Path, path: str) -> None:
    checkpoint = {"a": _odd_values(), "b": [torch.randn(17, 3, dtype=torch.float64), torch.randint(-9, 9, (5,))],
                  "c": _odd_values().to(torch.bfloat16), "d": torch.randn(4, 6).t()}  # ``d``: not contiguous
    if path == "plain":
        kind, payload, name = snapshot(checkpoint)
        assert isinstance(payload, bytes)  # CPU tensors take the plain path
    else:
        kind, payload, name = KIND_OBJECT, device_snapshot.take(checkpoint, copier=_CpuCopier(), on_device=_every), None
    writer = CheckpointWriter()
    writer.submit(tmp_path / "a.ckpt", kind, payload, name)
    writer.flush()
    assert writer.done() == (str(tmp_path / "a.ckpt"),)
    back = read_checkpoint(tmp_path / "a.ckpt")
    assert _same_bits(back["a"], checkpoint["a"]) and _same_bits(back["c"], checkpoint["c"])
    assert all(_same_bits(x, y) for x, y in zip(back["b"], checkpoint["b"], strict=True))
    assert torch.equal(back["d"], checkpoint["d"])


class _HeldEvent:
    """A copy's completion event that completes when the test says so; records who waited."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.waiting = threading.Event()
        self.release = threading.Event()
        self.thread: int | None = None
        self.copier: _CpuCopier | None = None

    def synchronize(self) -> None:
        self.thread = threading.get_ident()
        self.log.append("synchronize")
        self.waiting.set()
        assert self.release.wait(60)
        assert self.copier is not None
        self.copier.complete()  # the data lands in the host buffers as the event completes
        self.log.append("complete")


def test_the_writer_waits_for_the_copy_event_before_it_writes(tmp_path: Path) -> None:
    event = _HeldEvent()
    copier = event.copier = _CpuCopier(event, fill_on_sync=True)
    weights = torch.randn(64, 64)
    snap = device_snapshot.take({"w": weights, "step": 3}, copier=copier, on_device=_every)
    writer = CheckpointWriter()
    target = tmp_path / "a.ckpt"
    writer.submit(target, KIND_OBJECT, snap)  # returns without waiting for the copy
    assert event.waiting.wait(60)
    assert event.thread != threading.get_ident() and event.log == ["synchronize"]
    assert not target.exists() and writer.done() == () and copier.given_back == []
    event.release.set()
    writer.flush()
    assert event.log == ["synchronize", "complete"] and writer.done() == (str(target),)
    back = read_checkpoint(target)
    assert _same_bits(back["w"], weights) and back["step"] == 3  # written from the completed copy
    assert copier.given_back == [snap.host]  # the buffers return once the file is written


def test_host_buffers_are_reused_for_the_same_shapes_and_dropped_for_others() -> None:
    pool = PinnedPool(torch, pin=False)
    pool.begin()
    first = [pool.take((4, 4), torch.float32), pool.take((8,), torch.float16)]
    pool.give(first)
    pool.begin()
    again = pool.take((2, 8), torch.float32)  # same size and dtype: the same memory, reshaped
    assert again.data_ptr() == first[0].data_ptr() and again.shape == (2, 8)
    pool.give([again])
    assert pool.take((8,), torch.float16).data_ptr() != first[1].data_ptr()  # not used by the newest: dropped


def test_a_failed_copy_fails_that_checkpoint_only(tmp_path: Path) -> None:
    class _Broken:
        def synchronize(self) -> None:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

    copier = _CpuCopier(_Broken())
    writer = CheckpointWriter()
    writer.submit(tmp_path / "bad.ckpt", KIND_OBJECT, device_snapshot.take([torch.ones(2)], copier=copier, on_device=_every))
    writer.submit(tmp_path / "good.ckpt", *snapshot({"ok": 1})[:2])
    writer.flush()
    assert writer.done() == (str(tmp_path / "good.ckpt"),) and not (tmp_path / "bad.ckpt").exists()
    assert "illegal memory access" in writer.failures()[0] and len(copier.given_back) == 1


def test_checkpoints_without_tensors_never_import_torch(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import sys
        from pathlib import Path
        import numpy as np
        from emews.training.checkpoints import CheckpointWriter, read_checkpoint, snapshot
        writer = CheckpointWriter()
        state = {"weights": np.arange(10.0), "nested": [{"step": 3}, (1, "x")]}
        writer.submit(Path(sys.argv[1]), *snapshot(state))
        writer.flush()
        assert read_checkpoint(sys.argv[1])["nested"][0] == {"step": 3}
        print("torch" in sys.modules)
    """)
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path / "a.ckpt")], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def test_a_checkpoint_saved_on_a_missing_device_is_restored_on_the_cpu(tmp_path: Path, capsys) -> None:
    snap = device_snapshot.take({"w": _odd_values()}, copier=_CpuCopier(), on_device=_every)
    assert snap is not None
    snap.meta = [("cuda:99", False, False)]  # saved on a GPU this process does not have
    write_atomic(tmp_path / "a.ckpt", frame(KIND_OBJECT, snap))
    device_snapshot._warned = False
    back = read_checkpoint(tmp_path / "a.ckpt")
    assert back["w"].device.type == "cpu" and _same_bits(back["w"], _odd_values())
    assert "saved on cuda:99 are restored on the CPU" in capsys.readouterr().err


@pytest.mark.skipif("not _cuda()", reason="needs a CUDA GPU")
def test_cuda_tensors_are_copied_on_a_side_stream_and_restored_on_their_device(tmp_path: Path) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.Linear(1024, 8)).cuda()
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.randn(16, 1024, device="cuda")).sum().backward()
    optimizer.step()
    expected = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    kind, payload, _ = snapshot({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 1})
    assert isinstance(payload, DeviceSnapshot) and all(h.is_pinned() for h in payload.host)
    with torch.no_grad():  # queued after the copy: the current stream waits for its event
        for p in model.parameters():
            p.add_(1.0)
    writer = CheckpointWriter()
    writer.submit(tmp_path / "a.ckpt", kind, payload)
    writer.flush()
    assert writer.failures() == ()
    back = read_checkpoint(tmp_path / "a.ckpt")
    assert back["epoch"] == 1 and set(back["model"]) == set(expected)
    for key, value in back["model"].items():
        assert value.device == torch.device("cuda", 0) and _same_bits(value.cpu(), expected[key])
    assert back["optimizer"]["state"][0]["exp_avg"].is_cuda
    again = snapshot({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 2})[1]
    assert isinstance(again, DeviceSnapshot)
    assert {h.data_ptr() for h in again.host} & {h.data_ptr() for h in payload.host}  # pinned buffers reused
    again.wait()
    again.release()


def _gpu_check() -> Any:
    """``bench/gpu_check.py`` as a module: run in this process, whose torch is imported already."""
    import importlib.util

    script = Path(__file__).resolve().parents[2] / "bench" / "gpu_check.py"
    spec = importlib.util.spec_from_file_location("gpu_check", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _main(module: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    monkeypatch.setattr(sys, "argv", ["gpu_check.py", *args])
    module.main()
    return capsys.readouterr().out.splitlines()


@pytest.mark.skipif("_cuda()", reason="with a GPU the plain run is the 4-minute GPU check")
def test_the_gpu_check_script_says_in_one_line_when_there_is_no_gpu(monkeypatch, capsys) -> None:
    (line,) = _main(_gpu_check(), monkeypatch, capsys)
    assert line.startswith("gpu_check: no GPU here")


def test_the_gpu_check_scripts_cpu_smoke_run_forms_a_process_group_and_prints_the_overhead_table(
        monkeypatch, capsys, tmp_path: Path) -> None:
    """One ``--cpu`` run of checks (b) and (c) (two real ``emews launch`` runs: a 2-rank task's gloo
    group, the training with checkpoints); (a)'s objective is called here: on a CPU its launch
    would show nothing more than (b)'s and (c)'s do (workers running the script's objectives)."""
    module = _gpu_check()
    record = module.binding({"hold": 0, "cpu": True, "out": str(tmp_path), "job": 0}, None)
    written = json.loads((tmp_path / "binding-0.json").read_text())
    assert record == {"value": float(written["visible"])} and written["pid"] == os.getpid()
    assert written["CUDA_VISIBLE_DEVICES"] == os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)")
    lines = _main(module, monkeypatch, capsys, "--cpu", "--only", "nccl", "--only", "checkpoints")
    assert sum(line.lstrip().startswith("rank ") for line in lines) == 2  # the task's 2 team ranks
    assert "    ok" in lines  # the all_reduce summed the ranks' numbers
    rows = [line.split() for line in lines if line.split()[:1] in (["none"], ["gpu"], ["host"])]
    assert [row[0] for row in rows if row[-1].endswith("%")] == ["none", "gpu", "host"]  # the overhead table


class _FakeCuda:
    """``torch.cuda``'s streams and events as records, to check the order of the real copier's calls."""

    def __init__(self, log: list[str]) -> None:
        self.log = log
        log_ = log

        class Stream:
            def __init__(self, device: Any = None, name: str = "side") -> None:
                self.name = name
                log_.append(f"new stream on {device}")

            def wait_stream(self, other: Any) -> None:
                log_.append(f"{self.name} waits for {other.name}")

            def wait_event(self, event: Any) -> None:
                log_.append(f"{self.name} waits for event")

        class Event:
            def record(self, stream: Any) -> None:
                log_.append(f"event recorded on {stream.name}")

            def synchronize(self) -> None:
                log_.append(f"event synchronized by {threading.current_thread().name}")

        self.Stream, self.Event = Stream, Event
        self.current = Stream(name="current")
        log.clear()  # the training stream exists already

    def current_stream(self, device: Any = None) -> Any:
        return self.current

    @staticmethod
    def device(device: Any) -> Any:
        import contextlib

        return contextlib.nullcontext()

    def stream(self, stream: Any) -> Any:
        import contextlib

        @contextlib.contextmanager
        def on() -> Any:
            self.log.append(f"enter {stream.name}")
            yield
            self.log.append(f"leave {stream.name}")

        return on()


def test_the_cuda_copier_orders_the_copy_between_the_streams_without_blocking_the_host(tmp_path: Path,
                                                                                        monkeypatch) -> None:
    log: list[str] = []
    fake = _FakeCuda(log)
    for name in ("Stream", "Event", "current_stream", "device", "stream"):
        monkeypatch.setattr(torch.cuda, name, getattr(fake, name))
    original_copy = torch.Tensor.copy_

    def copy(self: Any, src: Any, non_blocking: bool = False) -> Any:
        log.append(f"copy non_blocking={non_blocking}")
        return original_copy(self, src, non_blocking=non_blocking)

    monkeypatch.setattr(torch.Tensor, "copy_", copy)
    copier = device_snapshot.CudaCopier(torch)  # pinning fails without a GPU: pageable buffers, same path
    weights, bias = torch.randn(8, 8), torch.randn(8)
    snap = device_snapshot.take({"w": weights, "b": bias}, copier=copier, on_device=_every)
    assert snap is not None
    log.append("report returned")
    assert log == ["new stream on cpu", "side waits for current", "enter side", "copy non_blocking=True",
                   "copy non_blocking=True", "event recorded on side", "leave side", "current waits for event",
                   "report returned"]  # the host never synchronized: only the current stream waits
    writer = CheckpointWriter()
    writer.submit(tmp_path / "a.ckpt", KIND_OBJECT, snap)
    writer.flush()
    assert log[-1] == "event synchronized by emews-checkpoints"  # the writer thread waited for the copy
    back = read_checkpoint(tmp_path / "a.ckpt")
    assert _same_bits(back["w"], weights) and _same_bits(back["b"], bias)
    snap_again = device_snapshot.take({"w": weights, "b": bias}, copier=copier, on_device=_every)
    assert snap_again is not None and {h.data_ptr() for h in snap_again.host} == {h.data_ptr() for h in snap.host}
    assert "new stream on cpu" not in log[log.index("report returned") + 1:]  # one side stream per device
