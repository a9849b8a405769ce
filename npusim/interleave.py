"""The blocks of a launch side by side in simulated time, so that they meet in L2 and HBM in time order.

Blocks are Python calls of the kernel. Simulated one after another, the first block would find every
line of shared data missing in L2 and fetch it all, and a later block would find everything it shares
already fetched, whatever the simulated times. So each block of a multi-core launch runs in its own
thread and only one runs at a time: a block stops at every GM DMA (:meth:`Interleaver.sync`, called by
:mod:`npusim.memsys` with the DMA's start time), and the block whose stop is earliest in simulated time
goes on (ties: the lower block index), then runs until its next GM DMA. The L2 and the HBM budget thus
see the GM DMAs of all cores in (nearly) time order: within a block, DMAs of different pipes are issued
in program order, which is not always their start order.

A block may also wait for others (SyncAll, a cross-core flag: :mod:`npusim.chipsync`): it stops with
:meth:`Interleaver.block` and goes on only when a running block wakes it (:meth:`Interleaver.wake`) at a
simulated time; when every block left waits, the launch would hang, and ``deadlock`` makes the error.

Deterministic: the order depends only on simulated times and block indices, never on the OS.
"""

from __future__ import annotations

import heapq
import threading
from typing import Any, Callable


class _Abort(BaseException):
    """Unwinds the other blocks' threads when one block raised."""


class Interleaver:
    """Runs ``n_blocks`` blocks on ``active`` cores; block ``b`` starts on core ``b % active`` when the
    block before it there has ended (waves)."""

    def __init__(self) -> None:
        self._wake: dict[int, threading.Event] = {}
        self._back = threading.Event()
        self._outcome: tuple = ()
        self._abort = False
        self._ready: list[tuple[float, int]] = []
        self._blocked: set[int] = set()

    # --- called from a block's thread ---------------------------------------------------------------
    def sync(self, core, t: float) -> None:
        """Block ``core.block_idx`` is about to start a GM DMA at ``t``: let every block that is
        earlier go first."""
        self._hand_back(core, ("sync", core.block_idx, t))

    def block(self, core) -> None:
        """Block ``core.block_idx`` waits until another block wakes it (see :meth:`wake`)."""
        self._hand_back(core, ("block", core.block_idx))

    def _hand_back(self, core, outcome: tuple) -> None:
        """Tell the scheduler ``outcome`` and sleep until it runs this block again."""
        self._outcome = outcome
        ev = self._wake[core.block_idx]
        ev.clear()
        self._back.set()
        ev.wait()
        if self._abort:
            raise _Abort
        from .core import run_on
        run_on(core)

    def wake(self, b: int, t: float) -> None:
        """Called by the running block: the waiting block ``b`` may go on from time ``t``."""
        if b in self._blocked:
            self._blocked.discard(b)
            heapq.heappush(self._ready, (t, b))

    # --- the launch's thread --------------------------------------------------------------------------
    def run(self, n_blocks: int, active: int, body: Callable[[int, float], tuple[Any, float]],
            deadlock: Callable[[list[int]], BaseException] | None = None, progress=None) -> dict:
        """Run every block; ``body(b, t0)`` runs block ``b`` from time ``t0`` and returns ``(result,
        end time)``. Returns ``{block: result}``; re-raises the first exception a block raised, and
        ``deadlock(blocked)`` when the blocks left all wait. ``progress``: a
        :class:`npusim.progress.LaunchProgress`, told of each step (from this thread, the notebook's)."""
        results: dict[int, Any] = {}
        self._ready = ready = [(0.0, b) for b in range(min(active, n_blocks))]
        threads: dict[int, threading.Thread] = {}
        try:
            while ready or self._blocked:
                if not ready:
                    raise deadlock(sorted(self._blocked)) if deadlock else RuntimeError("blocks wait forever")
                t, b = heapq.heappop(ready)
                if b not in threads:
                    self._wake[b] = threading.Event()
                    threads[b] = threading.Thread(target=self._worker, args=(b, t, body), daemon=True,
                                                  name=f"npusim-block-{b}")
                    self._back.clear()
                    threads[b].start()
                else:
                    self._back.clear()
                    self._wake[b].set()
                self._back.wait()
                kind = self._outcome[0]
                if kind == "sync":
                    heapq.heappush(ready, (self._outcome[2], b))
                    if progress is not None:
                        progress.tick(self._outcome[2])
                elif kind == "block":
                    self._blocked.add(b)
                elif kind == "done":
                    res, end = self._outcome[2], self._outcome[3]
                    results[b] = res
                    threads.pop(b).join()
                    if progress is not None:
                        progress.block_done(end)
                    if b + active < n_blocks:
                        heapq.heappush(ready, (end, b + active))
                else:
                    raise self._outcome[2]
        finally:
            if threads:   # a block raised: unwind the others where they wait
                self._abort = True
                for b, th in threads.items():
                    self._wake[b].set()
                for th in threads.values():
                    th.join()
        return results

    def _worker(self, b: int, t0: float, body) -> None:
        try:
            res, end = body(b, t0)
            self._outcome = ("done", b, res, end)
        except _Abort:
            return
        except BaseException as e:   # handed to the launch's thread, which re-raises it
            self._outcome = ("error", b, e)
        self._back.set()
