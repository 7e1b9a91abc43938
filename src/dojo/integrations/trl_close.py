"""Closing what dojo started under a TRL trainer, once training is over: ``close_trainer(trainer)``.

A ``GRPOTrainer`` with an async reward function or tool environment runs them on an event loop of
its own, on a daemon thread it stops only at interpreter exit; dojo's sandboxes on that loop (an
``AsyncDojoReward``'s, the ``DojoToolEnv`` pool) must be closed there, and a process that trains
more than once (a sweep, a notebook, the test suite) would otherwise keep one loop thread, its
executor's threads and a warm slot pool per trainer."""

from __future__ import annotations

import asyncio
import atexit
from typing import Any

from dojo.integrations.event_loops import SANDBOXES, stop_loop_thread
from dojo.integrations.trl_rewards import AsyncDojoReward, DojoReward
from dojo.integrations.trl_rollout import DojoRollout

CLOSE_TIMEOUT_S = 60.0  # a slot pool closes in well under a second; a bound, not an estimate


def close_trainer(trainer: Any) -> None:
    """Close every dojo reward function and ``DojoRollout`` of ``trainer`` and the sandboxes on its
    async loop, then stop that loop (its thread and executor). The trainer cannot train again
    afterwards. Safe to call on any trainer, and twice."""
    rollout = getattr(trainer, "rollout_func", None)
    if isinstance(rollout, DojoRollout):
        rollout.close()
    loop: asyncio.AbstractEventLoop | None = getattr(trainer, "async_loop", None)
    running = loop is not None and not loop.is_closed() and loop.is_running()
    for reward in getattr(trainer, "reward_funcs", None) or []:
        if isinstance(reward, DojoReward):
            reward.close()
        elif isinstance(reward, AsyncDojoReward) and loop is not None and running:
            asyncio.run_coroutine_threadsafe(reward.aclose(), loop).result(timeout=CLOSE_TIMEOUT_S)
    if loop is None or not running:
        return
    asyncio.run_coroutine_threadsafe(SANDBOXES.close(), loop).result(timeout=CLOSE_TIMEOUT_S)
    stop_loop_thread(loop, getattr(trainer, "async_loop_thread", None))
    try:  # TRL's own stop at exit would find the loop closed
        from trl.trainer.utils import shutdown_event_loop_in_daemon
    except ImportError:
        return
    atexit.unregister(shutdown_event_loop_in_daemon)
