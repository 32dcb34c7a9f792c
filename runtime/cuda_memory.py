"""GPU memory as tvms lends it: the caching pool of one device (`MemoryPool`), its blocks
(`_Block`), and the error when the device is out of memory (`DeviceMemoryError`). The device's
`runtime.cuda.DeviceRuntime` owns a pool and gives it the driver's allocation and the events
that order streams; this module makes no driver call itself."""

from __future__ import annotations

import collections
import threading
from typing import TYPE_CHECKING, Optional

from tvmscript.diagnostics import TVMScriptError

if TYPE_CHECKING:
    from .cuda import DeviceRuntime

__all__ = ["MemoryPool", "DeviceMemoryError", "round_size", "DEFAULT_CACHE_LIMIT"]

DEFAULT_CACHE_LIMIT = 1 << 30  # bytes of free blocks a device's pool keeps at most (`MemoryPool.cache_limit`)


def round_size(nbytes: int) -> int:
    """The pool's size class for ``nbytes``: a multiple of 512 bytes below 1 MiB, then eight
    classes per power of two (at most 12.5% more than asked)."""
    if nbytes <= 512:
        return 512
    if nbytes < 1 << 20:
        return (nbytes + 511) & ~511
    step = 1 << (nbytes.bit_length() - 4)
    return (nbytes + step - 1) // step * step


class _Block:
    """A block of device memory lent by a `MemoryPool`. Tensors hold it (views of one block
    share it); when the last one goes, the block goes back to the pool, not to the driver.
    ``stream``: the stream it was taken on; ``users``: the other streams that used it since
    (None when none did), whose work must be done before the block serves anyone again."""

    __slots__ = ("pool", "alloc", "size", "ptr", "stream", "users")

    def __del__(self) -> None:
        self.pool._returned.append((self.alloc, self.ptr, self.size, self.stream, self.users))


_new = object.__new__


class MemoryPool:
    """A caching allocator for one GPU. ``allocate(nbytes)`` gets memory from the driver (an
    object whose ``int()`` is the device address and whose ``free()`` releases it); blocks
    are handed out by size class (`round_size`) and kept, when given back, for the next
    request of that class on the same stream: that request's work runs after the work that
    used the block before, so reuse needs no synchronization. A block other streams used too
    (``_Block.users``) waits in ``_pending`` until events recorded on them (``fence(streams)``)
    say their work is done.

    Blocks come back from finalizers, which may run on any thread, even in the middle of
    `malloc` on the same one: they only append to ``_returned`` (a deque, safe without a lock),
    and `malloc` takes them in under the pool's lock."""

    def __init__(self, allocate, cache_limit: Optional[int] = DEFAULT_CACHE_LIMIT, fence=None) -> None:
        self._allocate = allocate
        self._fence = fence          # streams -> events recorded on them now (`DeviceRuntime` gives it)
        self._lock = threading.RLock()  # re-entered when the driver, out of memory, has the pool release
        self._returned: collections.deque = collections.deque()
        self._cached: dict = {}      # (stream, size class) -> [(allocation, address)]
        self._pending: list = []     # [events, allocation, address, size, stream]: blocks waiting for other streams
        self.in_use = 0              # bytes lent out (by size class)
        self.pooled = 0              # bytes cached or pending, free
        self.peak = 0
        self.device_allocations = 0  # times the driver was asked for memory
        self.cache_limit = cache_limit  # the high-water mark of `pooled` (None: no limit)
        self.retired = False         # its context was lost (`DeviceRuntime.recreate`): its blocks are gone

    def malloc(self, nbytes: int, stream=None) -> _Block:
        """A block of at least ``nbytes`` for work on ``stream`` (None: a pool used without streams)."""
        size = round_size(nbytes)
        with self._lock:
            if self._returned:
                self._take_returned()
            blocks = self._cached.get((stream, size))
            if blocks:
                alloc, ptr = blocks.pop()
                self.pooled -= size
            elif self._pending and self._settled(stream, size):
                alloc, ptr = self._cached[(stream, size)].pop()
                self.pooled -= size
            else:
                if self.cache_limit is not None and self.pooled > self.cache_limit:
                    # Above the high-water mark (calls of ever new shapes leave blocks of ever new
                    # sizes): the cached blocks go back to the driver before it is asked for more.
                    self._release()
                alloc = self._allocate(size)
                ptr = int(alloc)
                self.device_allocations += 1
            self.in_use += size
            if self.in_use > self.peak:
                self.peak = self.in_use
        block = _new(_Block)
        block.pool = self
        block.alloc = alloc
        block.size = size
        block.ptr = ptr
        block.stream = stream
        block.users = None
        return block

    def _take_returned(self) -> None:
        """File the blocks given back since the last call (under the lock)."""
        returned = self._returned
        while returned:
            alloc, ptr, size, stream, users = returned.popleft()
            self.in_use -= size
            self.pooled += size
            if users:
                self._pending.append([self._fence(users), alloc, ptr, size, stream])
            else:
                self._cached.setdefault((stream, size), []).append((alloc, ptr))

    def _settled(self, stream, size: int) -> bool:
        """Move the pending blocks whose other streams are done to their own stream's cache;
        whether one of (``stream``, ``size``) is among them."""
        found = False
        still = []
        for entry in self._pending:
            events, alloc, ptr, block_size, owner = entry
            if all(e.query() for e in events):
                self._cached.setdefault((owner, block_size), []).append((alloc, ptr))
                found = found or (owner is stream and block_size == size)
            else:
                still.append(entry)
        self._pending = still
        return found

    def release_cached(self) -> None:
        """Free the cached blocks back to the driver (those lent out stay; those other streams
        still use are freed once their work is done)."""
        with self._lock:
            self._take_returned()
            self._release()

    def _release(self) -> None:
        cached, self._cached = self._cached, {}
        pending, self._pending = self._pending, []
        self.pooled = 0
        for blocks in cached.values():
            for alloc, _ in blocks:
                alloc.free()
        for events, alloc, *_ in pending:
            for e in events:
                e.synchronize()
            alloc.free()

    def stats(self) -> dict:
        with self._lock:
            self._take_returned()
            return {"in_use_bytes": self.in_use, "pooled_bytes": self.pooled,
                    "reserved_bytes": self.in_use + self.pooled, "peak_in_use_bytes": self.peak,
                    "device_allocations": self.device_allocations}


class DeviceMemoryError(TVMScriptError, MemoryError):
    """The GPU is out of memory, even after the pool released its cached blocks: the message
    names what was being allocated (a tensor's dtype and shape, when it is one: ``tensor``),
    its size, the bytes tvms's tensors hold and what the device has free. Raised at a Relax
    binding, the VM places it there (which tensor of the program)."""

    def __init__(self, rt: DeviceRuntime, nbytes: int, driver_message: str = "") -> None:
        self.device, self.nbytes, self.in_use, self.driver_message = rt.device, nbytes, rt.pool.in_use, driver_message
        self.free = self.total = None
        try:
            self.free, self.total = (int(x) for x in rt.drv.mem_get_info())
        except Exception:  # noqa: BLE001 - a driver that cannot tell: left out of the message
            pass
        self._tensor = None
        super().__init__(self._text())

    @property
    def tensor(self) -> Optional[str]:
        return self._tensor

    @tensor.setter
    def tensor(self, what: str) -> None:
        self._tensor = what
        self.message = self._text()

    def _text(self) -> str:
        what = f"{self._tensor} ({_bytes(self.nbytes)})" if self._tensor else _bytes(self.nbytes)
        free = f", {_bytes(self.free)} of {_bytes(self.total)} free on the device" if self.total is not None else ""
        return (f"out of memory on {self.device}: cannot allocate {what}; tvms's tensors hold "
                f"{_bytes(self.in_use)}{free} (the pool's cached blocks were released first)")


def _bytes(n: int) -> str:
    """``n`` bytes, readably: ``"4.0 MiB"``, ``"512 bytes"``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"
