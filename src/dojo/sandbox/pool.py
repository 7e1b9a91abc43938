"""A pool of warm slots sized to the machine, refilled when a slot dies; plus fresh one-shot slots."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import itertools
import logging
import os
from typing import Any

from dojo.errors import InputError
from dojo.sandbox.cgroups import SlotCgroups
from dojo.sandbox.errors import SandboxError
from dojo.sandbox.slot import Slot, SlotConfig, SlotDied
from dojo.sandbox.uncancellable import to_the_end

log = logging.getLogger(__name__)

UID_BASE = 200_000  # slot uids; one per slot so that RLIMIT_NPROC and file ownership never mix
FRESH_UIDS = 8192  # dedicated slots (sessions, strict runs) alive at once, per pool


def default_pool_size() -> int:
    """Two slots per core: a run waiting on its pipes leaves the core to another slot."""
    return max(4, 2 * (os.cpu_count() or 1))


class SlotPool:
    """Warm slots behind a free-list. ``execute`` takes a free slot, runs one request, returns it."""

    def __init__(self, size: int, config: SlotConfig, cgroups: SlotCgroups | None) -> None:
        if not 1 <= size <= 1024:
            raise InputError(f"pool size must be between 1 and 1024, got {size}")
        self.size = size
        self.config = config
        self.cgroups = cgroups
        self._free: collections.deque[Slot] = collections.deque()
        self._waiters: collections.deque[asyncio.Future[Slot]] = collections.deque()
        self._slots: dict[str, Slot] = {}
        self._replacing: set[asyncio.Task[None]] = set()
        self._fresh_ids = itertools.count()
        self._fresh_uids_free: list[int] = []
        self._fresh: dict[str, Slot] = {}
        self._fresh_sem = asyncio.Semaphore(size)
        self._closed = False
        # Per process and per pool: uids never collide between two pools of one host process.
        self._uid_base = UID_BASE + ((os.getpid() * 16 + (id(self) >> 4) % 16) % 65536) * (FRESH_UIDS + 1024)
        self.restarts = 0
        self.runs = 0

    async def start(self) -> None:
        """Start every slot; if one cannot start, or the start is cancelled, none is left running."""
        if self.cgroups:
            await asyncio.to_thread(self.cgroups.create_pool)
        slots = [Slot(f"slot-{i}", self._uid_base + i, self.config, self.cgroups) for i in range(self.size)]
        try:
            results = await asyncio.gather(*(s.start() for s in slots), return_exceptions=True)
            errors = [r for r in results if isinstance(r, BaseException)]
            if errors:
                raise errors[0]
        except BaseException:
            self._closed = True  # a pool that did not start serves nothing: it is closed, not left open
            await to_the_end(self._discard(slots))
            raise
        for s in slots:
            self._slots[s.name] = s
            self._release(s)

    async def _discard(self, slots: list[Slot]) -> None:
        await asyncio.gather(*(s.kill() for s in slots), return_exceptions=True)
        if self.cgroups:
            await asyncio.to_thread(self.cgroups.remove_pool)

    async def execute(
        self, header: dict[str, Any], blobs: list[bytes], timeout: float
    ) -> tuple[dict[str, Any], list[bytes]]:
        """Run one request on a warm slot. Raises SlotDied when the slot died under it."""
        if self._closed:
            raise SandboxError("the sandbox pool is closed")
        while True:
            slot = await self._acquire()
            if slot.alive and slot.proc is not None and slot.proc.returncode is None:
                break
            self._replace(slot)  # died while idle: replace it and take another
        try:
            resp = await slot.request(header, blobs, timeout)
        except BaseException:
            if not slot.alive:
                self._replace(slot)
            else:
                self._release(slot)
            raise
        self.runs += 1
        self._release(slot)
        return resp

    async def _acquire(self) -> Slot:
        """First come, first served. (asyncio.Queue lets a task that just returned a slot take it
        straight back ahead of woken waiters, which starved some callers for seconds under load.)"""
        if self._free and not self._waiters:
            return self._free.popleft()
        fut: asyncio.Future[Slot] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self._release(fut.result())  # handed over just as we were cancelled: pass it on
            else:
                self._waiters.remove(fut)
            raise

    def _release(self, slot: Slot) -> None:
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(slot)
                return
        self._free.append(slot)

    def _take_uid(self) -> int:
        if self._fresh_uids_free:
            return self._fresh_uids_free.pop()
        n = next(self._fresh_ids)
        if n >= FRESH_UIDS:
            raise SandboxError(f"more than {FRESH_UIDS} dedicated slots at once")
        return self._uid_base + 1024 + n

    def _give_uid(self, uid: int) -> None:
        self._fresh_uids_free.append(uid)

    async def start_fresh(self, name: str, disk_bytes: int | None = None) -> Slot:
        """A dedicated slot (for a session or a strict run; ``disk_bytes``: the size of its scratch
        filesystems, a session's ``limits.disk``); stop it with ``stop_fresh``."""
        if self._closed:
            raise SandboxError("the sandbox pool is closed")
        uid = self._take_uid()
        config = self.config if disk_bytes is None else dataclasses.replace(self.config, disk_bytes=disk_bytes)
        slot = Slot(f"{name}-{uid - self._uid_base}", uid, config, self.cgroups)
        try:
            await slot.start()
        except BaseException:
            await slot.kill()
            self._give_uid(uid)
            raise
        self._fresh[slot.name] = slot
        return slot

    async def stop_fresh(self, slot: Slot) -> None:
        await slot.kill()
        if self._fresh.pop(slot.name, None) is not None:
            self._give_uid(slot.uid)

    async def execute_fresh(
        self, header: dict[str, Any], blobs: list[bytes], timeout: float
    ) -> tuple[dict[str, Any], list[bytes]]:
        """Strict isolation: fresh namespaces and a fresh zygote for this one request."""
        if self._closed:
            raise SandboxError("the sandbox pool is closed")
        async with self._fresh_sem:
            slot = await self.start_fresh("fresh")
            try:
                resp = await slot.request({**header, "last": True}, blobs, timeout)
            finally:
                await self.stop_fresh(slot)
            self.runs += 1
            return resp

    def _replace(self, slot: Slot) -> None:
        if self._closed:
            return
        self.restarts += 1
        task = asyncio.create_task(self._restart(slot))
        self._replacing.add(task)
        task.add_done_callback(self._replacing.discard)

    async def _restart(self, old: Slot) -> None:
        await old.kill()
        delay = 0.05
        while not self._closed:
            slot = Slot(old.name, old.uid, self.config, self.cgroups)
            try:
                await slot.start()
            except Exception as e:  # whatever it is, the pool must not stay a slot short for good
                log.warning("could not restart %s: %s; retrying in %.2fs", old.name, e, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            if self._closed:
                await slot.kill()
                return
            self._slots[slot.name] = slot
            self._release(slot)
            return

    def slots(self) -> list[Slot]:
        return list(self._slots.values())

    async def close(self) -> None:
        self._closed = True
        for task in list(self._replacing):
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*self._replacing, return_exceptions=True)
        await asyncio.gather(*(s.kill() for s in self._slots.values()), return_exceptions=True)
        await asyncio.gather(*(s.kill() for s in list(self._fresh.values())), return_exceptions=True)
        if self.cgroups:
            await asyncio.to_thread(self.cgroups.remove_pool)


__all__ = ["SlotDied", "SlotPool", "default_pool_size"]
