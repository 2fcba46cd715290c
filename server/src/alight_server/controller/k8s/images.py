"""The images a Job may run: pinned by digest (`name@sha256:<64 hex>`), and scanned once per digest when asked.

The rule, what counts as pinned and how a scan fails closed: docs/controller.md, "Images". A scanner runs with
only `SCANNER_ENV` of the controller's environment; a pass is cached per digest as a JSON file in `cache_dir`
(also the record of what was scanned), a failure never.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_NAME = r"(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:(?:[._]|__|-+|/)[a-z0-9]+)*"
_TAG = r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
PINNED = re.compile(rf"(?P<name>{_NAME}){_TAG}@(?P<digest>sha256:[0-9a-f]{{64}})")
HOW_TO_PIN = (
    "pin it by digest, name@sha256:<64 hex> (find it with `docker buildx imagetools inspect IMAGE` or "
    "`crane digest IMAGE`), or pass --allow-unpinned-images (KubernetesRunner(allow_unpinned_images=True)) "
    "to run tags anyway"
)
# The scanner's whole environment, taken from the controller's: where binaries, caches and registry
# credentials live. Nothing else passes, so no alight key or attempt secret reaches it.
SCANNER_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "XDG_CACHE_HOME", "DOCKER_CONFIG", "SSL_CERT_FILE",
               "SSL_CERT_DIR", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY")  # fmt: skip
OUTPUT_TAIL_CHARS = 2000


def pinned_digest(image: str) -> str | None:
    """`sha256:<hex>` when the image is pinned by digest, else None."""
    found = PINNED.fullmatch(image)
    return found.group("digest") if found else None


def require_pinned(image: str, where: str) -> str:
    """The image's digest; ValueError naming the image, where it came from and how to pin it."""
    digest = pinned_digest(image)
    if digest is None:
        raise ValueError(f"{where}: image {image!r} is not pinned by digest; {HOW_TO_PIN}")
    return digest


def job_images(job: dict[str, Any]) -> list[tuple[str, str]]:
    """(container name, image) of every container and init container of a Job's Pod."""
    pod_spec = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = [*(pod_spec.get("initContainers") or []), *(pod_spec.get("containers") or [])]
    return [(c.get("name") or "", c.get("image") or "") for c in containers]


def fixed_images(template: dict[str, Any], image: str | None) -> list[tuple[str, str]]:
    """(where, image) for the images known before any rollout: the runner's own and the template's literal ones."""
    known = [("the runner's --image", image)] if image else []
    known += [(f"the Job template's container {name!r}", found) for name, found in job_images(template)
              if found and "{{" not in found]  # fmt: skip
    return known


def ran_digest(image_id: str | None) -> str | None:
    """The digest in a Pod's `containerStatuses[].imageID` (`docker-pullable://name@sha256:...` or `name@sha256:...`)."""
    found = re.search(r"@(sha256:[0-9a-f]{64})$", image_id or "")
    return found.group(1) if found else None


def ran_images(job: dict[str, Any], pod: dict[str, Any] | None, scan: ImageScan | None) -> list[dict[str, Any]]:
    """What an attempt's `image` event records per container: the image as given, whether it was pinned, the
    digest (the reference's, else the one the Pod reports it ran), the Pod's imageID and the image's scan."""
    status = (pod or {}).get("status") or {}
    ran = {s.get("name"): s.get("imageID") for s in (status.get("initContainerStatuses") or [])
           + (status.get("containerStatuses") or [])}  # fmt: skip
    recorded = []
    for container, image in job_images(job):
        result = scan.result(image) if scan is not None else None
        recorded.append({
            "container": container, "image": image, "pinned": pinned_digest(image) is not None,
            "digest": pinned_digest(image) or ran_digest(ran.get(container)), "image_id": ran.get(container) or None,
            "scan": result and {k: result[k] for k in ("passed", "cached", "command", "scanned_at")},
        })  # fmt: skip
    return recorded


class ImageRefused(Exception):
    """The scan refused an image (failed, timed out, or could not run)."""


@dataclass
class ImageScan:
    """`command` with `{image}` run once per image; see the module docstring."""

    command: str
    timeout_s: float = 600.0
    cache_dir: Path | None = None

    def __post_init__(self) -> None:
        try:
            argv = shlex.split(self.command)
        except ValueError as exc:
            raise ValueError(f"--image-scan {self.command!r} does not parse as a command line: {exc}") from exc
        if not argv or not any("{image}" in part for part in argv):
            raise ValueError(f"--image-scan {self.command!r} must name the image as {{image}}, e.g. "
                             "'trivy image --exit-code 1 {image}'")  # fmt: skip
        self.argv = argv
        self._lock = threading.Lock()
        self._results: dict[str, dict[str, Any]] = {}  # image -> result, passes and failures, this process

    def check(self, image: str, env: Mapping[str, str]) -> dict[str, Any]:
        """The scan's result for `image` (run now, or cached); ImageRefused unless it passed."""
        with self._lock:  # one scan per image even when two attempts start at once
            result = self._results.get(image) or self._cached(image)
            if result is None:
                result = self._run(image, env)
                self._store(image, result)
            self._results[image] = result
        if not result["passed"]:
            raise ImageRefused(f"image {image!r} failed its scan ({result['why']}): {result['output_tail']}")
        return result

    def result(self, image: str) -> dict[str, Any] | None:
        """The image's last scan result (this process's, else the cache's), without scanning."""
        with self._lock:
            return self._results.get(image) or self._cached(image)

    def _cache_file(self, image: str) -> Path | None:
        digest = pinned_digest(image)
        if self.cache_dir is None or digest is None:
            return None  # a tag's content can change: only a digest's result is kept across runs
        return self.cache_dir / f"{digest.replace(':', '-')}.json"

    def _cached(self, image: str) -> dict[str, Any] | None:
        path = self._cache_file(image)
        if path is None or not path.exists():
            return None
        try:
            result = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return {**result, "cached": True} if result.get("passed") and result.get("command") == self.command else None

    def _store(self, image: str, result: dict[str, Any]) -> None:
        path = self._cache_file(image)
        if path is not None and result["passed"]:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(result, indent=2) + "\n")
            tmp.replace(path)

    def _run(self, image: str, env: Mapping[str, str]) -> dict[str, Any]:
        argv = [part.replace("{image}", image) for part in self.argv]
        started = time.time()
        result: dict[str, Any] = {"image": image, "digest": pinned_digest(image), "command": self.command,
                                  "scanned_at": started, "cached": False}  # fmt: skip
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                env={k: env[k] for k in SCANNER_ENV if k in env}, start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            return {**result, "passed": False, "exit_code": None, "why": f"cannot run {argv[0]}: {exc.strerror}",
                    "output_tail": "", "seconds": 0.0}  # fmt: skip
        try:
            output, _ = proc.communicate(timeout=self.timeout_s)
            passed, why = proc.returncode == 0, f"{argv[0]} exited with {proc.returncode}"
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):  # the scanner and whatever it started
                os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            passed, why = False, f"{argv[0]} ran past its {self.timeout_s:g} s timeout"
        tail = output.decode("utf-8", errors="replace")[-OUTPUT_TAIL_CHARS:]
        return {**result, "passed": passed, "exit_code": proc.returncode, "why": why, "output_tail": tail,
                "seconds": round(time.time() - started, 3)}  # fmt: skip
