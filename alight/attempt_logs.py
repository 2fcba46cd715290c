"""Where an attempt's captured output lives: the local runner's files, and the event its controller uploads.

While an attempt runs its output is `<n>.log`, in the clear (the agent writes it); once the controller
releases the attempt it is `<n>.log.sealed` (alight_server/store/keys/sealed_logs.py) and the clear file is gone.
"""

from __future__ import annotations

from pathlib import Path

LOG_EVENT_KIND = "log"  # the event kind the controller uploads an attempt's output as
DEFAULT_LOGS_DIR = ".alight/logs"
SEALED_SUFFIX = ".sealed"  # `<n>.log.sealed`: an ended attempt's log, sealed at rest


def attempt_dir(logs_dir: str | Path, rollout_id: str) -> Path:
    # Rollout ids match [A-Za-z0-9._:-]+, so "." and ".." are legal ids but not safe folder names: they get
    # a "_" in front, and so does every id starting with "_", so no two ids share a folder ("..", "_..").
    name = rollout_id if rollout_id.strip(".") and not rollout_id.startswith("_") else f"_{rollout_id}"
    return Path(logs_dir) / name


def attempt_log_path(logs_dir: str | Path, rollout_id: str, attempt: int) -> Path:
    """Where the local runner captures an attempt's output (also read by `alight logs`)."""
    return attempt_dir(logs_dir, rollout_id) / f"{attempt}.log"


def sealed_log(log_path: Path) -> Path:
    """Where an ended attempt's log is kept sealed (the clear `log_path` removed)."""
    return log_path.with_name(log_path.name + SEALED_SUFFIX)
