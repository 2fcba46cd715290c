"""scripts/setup.sh's parts: every setup.sh flag the repository tells people to run is one it accepts."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETUP = ROOT / "scripts" / "setup.sh"
NAMED = re.compile(r"setup\.sh((?: --[a-z][a-z-]*)+)")


def repository_texts() -> list[Path]:
    """The tracked text files people read or run (git's list: no venvs, caches or node_modules)."""
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    texts = [ROOT / name for name in listed.splitlines()]
    return [p for p in texts if p.suffix in {".py", ".md", ".yaml", ".yml", ".toml", ".sh"} and p.is_file()]


def accepted_flags() -> set[str]:
    """The flags in setup.sh's `case` arms (`--a | --b)`)."""
    text = SETUP.read_text()
    return {flag for arm in re.findall(r"^\s+(-[^)\n]*)\)", text, re.M) for flag in re.findall(r"--[a-z-]+", arm)}


def test_every_setup_flag_the_repository_names_is_a_part_setup_sh_accepts() -> None:
    named: dict[str, list[str]] = {}
    for path in repository_texts():
        for match in NAMED.finditer(path.read_text(errors="replace")):
            for flag in match.group(1).split():
                named.setdefault(flag, []).append(str(path.relative_to(ROOT)))
    assert {"--coding", "--cli", "--browser", "--all"} <= named.keys()  # the scan finds the skip messages
    unknown = {flag: where for flag, where in named.items() if flag not in accepted_flags()}
    assert not unknown, f"named but not accepted by scripts/setup.sh: {unknown}"


def test_setup_sh_refuses_an_unknown_part_before_installing_anything() -> None:
    done = subprocess.run(["bash", str(SETUP), "--everything"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert "unknown part --everything" in done.stderr and "--help" in done.stderr


def test_setup_sh_help_lists_every_part_it_accepts() -> None:
    done = subprocess.run(["bash", str(SETUP), "--help"], capture_output=True, text=True, timeout=30, check=True)
    listed = set(re.findall(r"setup\.sh (--[a-z-]+)", done.stdout))
    assert accepted_flags() - {"--help"} == listed
