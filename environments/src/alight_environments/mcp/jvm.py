"""A py4j simulator's JVM (ScienceWorld, TextWorldExpress): stopped and waited for, so none outlives its game."""

from __future__ import annotations

import subprocess
from typing import Any

EXIT_S = 10.0


def stop(env: Any) -> None:
    """Close the simulator and wait for its JVM (killed past EXIT_S)."""
    process: subprocess.Popen[bytes] = env._gateway.java_process
    try:
        env.close()
    finally:
        try:
            process.wait(EXIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
