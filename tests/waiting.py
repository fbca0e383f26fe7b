"""Waiting on a condition with a generous deadline, never a fixed sleep: a test must pass on a busy machine
(other work on the cores slows every step), and it is as fast as the machine when the machine is idle."""
from __future__ import annotations

import time

#: seconds a test waits for something that takes well under a second on an idle machine
GENEROUS_S = 120.0


def wait_until(cond, timeout: float = GENEROUS_S, what: str = "the condition", poll: float = 0.02):
    """Call ``cond()`` every ``poll`` s until it returns something truthy, and return that; after ``timeout``
    s raise ``AssertionError`` naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g} s")
        time.sleep(poll)
