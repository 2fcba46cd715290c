# pyright: strict
"""Dying with a parent: Linux's PR_SET_PDEATHSIG for the processes alight starts (attempt leaders, zygotes, sandboxes).

Standard library only, and nothing else of the SDK: the attempt supervisor (alight_server/controller/supervise.py)
loads this file by itself, without the SDK package, to keep its bare interpreter start.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
PARENT_DIED = signal.SIGUSR2  # what alight's process leaders are sent: a signal nothing else sends them


def signal_on_parent_death(signum: int) -> bool:
    """Have the kernel send `signum` to this process when its parent (the thread that forked it) dies, also across
    an exec (not a setuid one); False where that is not Linux."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signum))
    return True


def on_parent_death(handler: Callable[[int, object], object], parent: int) -> None:
    """Run `handler` (a signal handler) when process `parent` dies, also when it died before this was set. Elsewhere
    than on Linux nothing is set up: the stack's next start reaps leftover process groups (LocalRunner.reap_leftovers).
    """
    if not sys.platform.startswith("linux"):
        return
    signal.signal(PARENT_DIED, handler)
    signal_on_parent_death(PARENT_DIED)
    if os.getppid() != parent:  # it died before the prctl took effect
        handler(int(PARENT_DIED), None)
