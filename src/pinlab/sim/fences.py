"""Bridging kernel fences and SimPy events.

The kernel layer hands fences to whoever drives time (``pinlab.kernel.kernel.FenceWaiter``);
here a fence becomes a SimPy event that fires when the fence signals, so a simulated process
can ``yield`` on the fences a syscall collected.
"""

from __future__ import annotations

from collections.abc import Iterable

import simpy

from pinlab.kernel.fence import DmaFence


def fence_event(env: simpy.Environment, fence: DmaFence) -> simpy.Event:
    """An event that succeeds (with the fence) when ``fence`` signals; at once if it has."""
    event = env.event()
    if fence.signaled:
        event.succeed(fence)
    else:

        def signalled(f: DmaFence) -> None:
            event.succeed(f)

        fence.add_callback(signalled)
    return event


def wait_all(env: simpy.Environment, fences: Iterable[DmaFence]) -> simpy.Event:
    """An event that fires once every fence in ``fences`` has signalled."""
    events = [fence_event(env, f) for f in fences if not f.signaled]
    if not events:
        done = env.event()
        done.succeed([])
        return done
    return simpy.AllOf(env, events)
