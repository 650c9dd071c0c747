"""Snapshots of CUDA tensors that do not make the training step wait (DataStates-LLM's point).

When a checkpoint holds torch tensors on a CUDA device (a ``state_dict``, an optimizer's state,
dicts, lists and tuples of tensors), :func:`take` starts, on the training thread, a copy of each
into a pinned host buffer on a side CUDA stream (``non_blocking=True``), records an event after the
copies and makes each device's *current* stream wait on it: later kernels (the next optimizer
step) cannot modify a tensor before it is copied, and the host does not block. The rest of the
checkpoint is pickled at once, each device tensor left as a reference. The background writer
calls :meth:`DeviceSnapshot.pieces`, which synchronizes on the events and then pickles the host
copies (zero-copy: the pinned buffers are written to the file as they are), and
:meth:`DeviceSnapshot.release` hands the buffers back for the next checkpoint of the same shapes.

The file is an ordinary pickled checkpoint: loading it rebuilds the tensors on the device they
were saved from (``cuda:0`` is the loading process's first visible GPU, as ``torch.load``
without ``map_location``); where that device does not exist the tensors stay on the CPU (as
``map_location="cpu"``), said once on stderr. Torch is never imported here: a process that has
not imported it cannot hold a tensor, so a checkpoint without tensors takes the plain path.
"""

from __future__ import annotations

import io
import pickle
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

#: the file's pickle protocol: 5 writes a host buffer in-band without a copy (``PickleBuffer``)
_PICKLE = 5


class Event(Protocol):
    def synchronize(self) -> None: ...


class Copier(Protocol):
    """Starts the copies of device tensors to host buffers; returns the buffers and the events
    after which they hold the data."""

    def copy(self, tensors: list[Any]) -> tuple[list[Any], list[Event]]: ...

    def give_back(self, host: list[Any]) -> None: ...


def device_tensors(obj: Any, torch: Any, on_device: Callable[[Any], bool] | None = None) -> Iterator[Any]:
    """The tensors on a device (CUDA by default) in ``obj`` and its nested mappings, lists and
    tuples (each object once; other objects are not looked into)."""
    on_device = on_device or _is_cuda
    seen: set[int] = set()
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            if id(item) not in seen and on_device(item):
                seen.add(id(item))
                yield item
        elif isinstance(item, (Mapping, list, tuple)) and id(item) not in seen:
            seen.add(id(item))
            stack.extend(item.values() if isinstance(item, Mapping) else item)


def _is_cuda(tensor: Any) -> bool:
    """A dense CUDA tensor (sparse and quantized ones are left to torch's own pickling)."""
    return tensor.device.type == "cuda" and str(tensor.layout) == "torch.strided" and not tensor.is_quantized


@dataclass(eq=False)
class DeviceSnapshot:
    """A checkpoint whose device tensors are being copied to host buffers."""

    skeleton: bytes  # the checkpoint pickled with device tensor ``i`` as persistent id ``i``
    host: list[Any]  # the host copies (filled once ``events`` complete)
    meta: list[tuple[str, bool, bool]]  # each tensor's device, requires_grad, is a Parameter
    events: list[Event]
    copier: Copier | None = None
    size: int = 0  # bytes of :meth:`pieces` (known before the copies end: data does not change it)
    _released: bool = field(default=False, repr=False)
    _waited: bool = field(default=False, repr=False)

    def wait(self) -> None:
        """Block until every copy has completed (the writer thread calls this, never training)."""
        if not self._waited:
            for event in self.events:
                event.synchronize()
            self._waited = True

    def pieces(self) -> list[Any]:
        """The pickled checkpoint, after the copies completed: buffers that reference the host
        copies (valid until :meth:`release`)."""
        self.wait()
        return _dump(self)

    def release(self) -> None:
        """The file is written: the host buffers may take the next snapshot."""
        if not self._released and self.copier is not None:
            self._released = True
            self.copier.give_back(self.host)


def take(
    checkpoint: Any, *, copier: Copier | None = None, on_device: Callable[[Any], bool] | None = None
) -> DeviceSnapshot | None:
    """Start the snapshot of ``checkpoint``'s device tensors; ``None`` when it has none (the
    caller pickles it as always). ``copier``/``on_device``: CUDA's unless given (tests)."""
    torch = sys.modules.get("torch")
    if torch is None or next(device_tensors(checkpoint, torch, on_device), None) is None:
        return None
    found: list[Any] = []
    skeleton = _skeleton(checkpoint, torch, on_device or _is_cuda, found)
    copier = copier or _cuda_copier(torch)
    host, events = copier.copy(found)
    meta = [(str(t.device), bool(t.requires_grad), isinstance(t, torch.nn.Parameter)) for t in found]
    snap = DeviceSnapshot(skeleton, host, meta, events, copier)
    snap.size = sum(memoryview(piece).nbytes for piece in _dump(snap))  # pickle sizes do not depend on data
    return snap


def _skeleton(checkpoint: Any, torch: Any, on_device: Callable[[Any], bool], found: list[Any]) -> bytes:
    """``checkpoint`` pickled now, each device tensor replaced by its index in ``found``."""
    index: dict[int, int] = {}

    class _Pickler(pickle.Pickler):
        def persistent_id(self, obj: Any) -> int | None:
            if isinstance(obj, torch.Tensor) and on_device(obj):
                if id(obj) not in index:
                    index[id(obj)] = len(found)
                    found.append(obj)
                return index[id(obj)]
            return None

    out = io.BytesIO()
    _Pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(checkpoint)
    return out.getvalue()


class _Pieces:
    """A file-like that keeps what the pickler writes; large buffers by reference (no copy)."""

    def __init__(self) -> None:
        self.parts: list[Any] = []

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self.parts.append(view)
        return view.nbytes


class _Payload:
    """What the file holds: rebuilt by :func:`_assemble` when loaded."""

    def __init__(self, snap: DeviceSnapshot) -> None:
        self.snap = snap

    def __reduce__(self) -> tuple[Any, ...]:
        torch = sys.modules["torch"]
        tensors = []
        for host, (device, grad, parameter) in zip(self.snap.host, self.snap.meta, strict=True):
            flat = host.reshape(-1)
            raw = flat.view(torch.uint8) if flat.numel() else torch.empty(0, dtype=torch.uint8)
            dtype = str(host.dtype).removeprefix("torch.")
            tensors.append((pickle.PickleBuffer(raw.numpy()), dtype, tuple(host.shape), device, grad, parameter))
        return _assemble, (self.snap.skeleton, tensors)


def _dump(snap: DeviceSnapshot) -> list[Any]:
    out = _Pieces()
    pickle.Pickler(out, protocol=_PICKLE).dump(_Payload(snap))
    return out.parts


_warned = False


def _assemble(skeleton: bytes, tensors: list[tuple[Any, str, tuple[int, ...], str, bool, bool]]) -> Any:
    """Load time: the checkpoint with its tensors back on their devices."""
    import torch

    rebuilt = []
    for raw, dtype, shape, device, grad, parameter in tensors:
        data = torch.frombuffer(raw, dtype=torch.uint8) if len(raw) else torch.empty(0, dtype=torch.uint8)
        tensor = data.view(getattr(torch, dtype)).reshape(shape)
        if _device_here(torch, device):
            tensor = tensor.to(device)
        if parameter:
            tensor = torch.nn.Parameter(tensor, requires_grad=grad)
        elif grad:
            tensor.requires_grad_(True)
        rebuilt.append(tensor)

    class _Unpickler(pickle.Unpickler):
        def persistent_load(self, pid: Any) -> Any:
            return rebuilt[pid]

    return _Unpickler(io.BytesIO(skeleton)).load()


def _device_here(torch: Any, device: str) -> bool:
    """Whether ``device`` exists in this process (else the tensor stays on the CPU, said once)."""
    global _warned
    kind, _, number = device.partition(":")
    if kind == "cpu":
        return False
    if kind == "cuda" and torch.cuda.is_available() and int(number or 0) < torch.cuda.device_count():
        return True
    if not _warned:
        _warned = True
        print(
            f"emews: checkpoint tensors saved on {device} are restored on the CPU: no such device here", file=sys.stderr
        )
    return False


class PinnedPool:
    """Host buffers kept across checkpoints (pinning is expensive): taken by shape and dtype,
    handed back once written. Buffers of a size the newest snapshot did not use are dropped."""

    def __init__(self, torch: Any, pin: bool = True) -> None:
        self._torch = torch
        self._pin = pin
        self._free: dict[tuple[Any, int], list[Any]] = {}
        self._used: set[tuple[Any, int]] = set()
        self._lock = threading.Lock()

    def begin(self) -> None:
        """A new snapshot starts: it decides which sizes stay."""
        with self._lock:
            self._used = set()

    def take(self, shape: Any, dtype: Any) -> Any:
        numel = 1
        for n in shape:
            numel *= n
        key = (dtype, numel)
        with self._lock:
            self._used.add(key)
            free = self._free.get(key)
            flat = free.pop() if free else None
        if flat is None:
            flat = self._allocate(numel, dtype)
        return flat.view(shape)

    def give(self, host: list[Any]) -> None:
        with self._lock:
            for tensor in host:
                key = (tensor.dtype, tensor.numel())
                if key in self._used:
                    self._free.setdefault(key, []).append(tensor.reshape(-1))
            for key in [k for k in self._free if k not in self._used]:
                del self._free[key]

    def _allocate(self, numel: int, dtype: Any) -> Any:
        if self._pin:
            try:
                return self._torch.empty(numel, dtype=dtype, pin_memory=True)
            except RuntimeError:  # no pinnable memory left: a pageable buffer (the copy then blocks)
                pass
        return self._torch.empty(numel, dtype=dtype)


class CudaCopier:
    """Copies on one side stream per device; each device's current stream waits for them."""

    def __init__(self, torch: Any) -> None:
        self._torch = torch
        self.pool = PinnedPool(torch)
        self._streams: dict[Any, Any] = {}

    def copy(self, tensors: list[Any]) -> tuple[list[Any], list[Event]]:
        torch = self._torch
        self.pool.begin()
        host: list[Any] = [None] * len(tensors)
        by_device: dict[Any, list[int]] = {}
        for i, tensor in enumerate(tensors):
            by_device.setdefault(tensor.device, []).append(i)
        events = []
        with torch.no_grad():
            for device, indices in by_device.items():
                side = self._streams.get(device)
                if side is None:
                    side = self._streams[device] = torch.cuda.Stream(device=device)
                current = torch.cuda.current_stream(device)
                side.wait_stream(current)  # the copies see every kernel queued before the report
                with torch.cuda.device(device), torch.cuda.stream(side):
                    for i in indices:
                        host[i] = self.pool.take(tensors[i].shape, tensors[i].dtype)
                        host[i].copy_(tensors[i], non_blocking=True)
                    event = torch.cuda.Event()
                    event.record(side)
                # later kernels wait for the copies: no tensor changes (or is freed and its memory
                # reused: the allocator's stream is this one) before it is copied; no record_stream
                current.wait_event(event)
                events.append(event)
        return host, events

    def give_back(self, host: list[Any]) -> None:
        self.pool.give(host)


_COPIER: CudaCopier | None = None


def _cuda_copier(torch: Any) -> CudaCopier:
    global _COPIER
    if _COPIER is None:
        _COPIER = CudaCopier(torch)
    return _COPIER
