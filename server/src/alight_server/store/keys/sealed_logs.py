"""Attempt logs at rest: an ended attempt's output file sealed (AES-GCM frames) under the store's KEK.

When a log is sealed, what its per-file key and frames are bound to, and why the running file stays clear:
docs/data.md "Attempt logs at rest". File: MAGIC, a JSON header line (KEK fingerprint, the wrapped per-file key),
then frames: 4-byte length, 12-byte nonce, ciphertext.
"""

from __future__ import annotations

import json
import os
import secrets
import struct
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from alight.attempt_logs import sealed_log
from alight_server.store.base import SealError
from alight_server.store.keys.kek import SETTING, KekSource
from alight_server.store.keys.keyring import unwrap, wrap

MAGIC = b"alight-sealed-log 1\n"
CHUNK = 1 << 20
_LENGTH = struct.Struct(">I")


def log_name(path: Path) -> str:
    """The attempt a log file belongs to, `<rollout folder>/<n>`: what its key is bound to."""
    return f"{path.parent.name}/{path.name.split('.')[0]}"


def _frame_ad(key_id: str, index: int, last: bool) -> bytes:
    return f"alight-log\0{key_id}\0{index}\0{int(last)}".encode()


class LogSeal:
    """Seals ended attempts' logs under `source`'s first KEK and opens them under any of its KEKs."""

    def __init__(self, source: KekSource) -> None:
        self.source = source
        self._keks = dict(zip(source.ids(), source.keys(), strict=True))  # KekError when unreadable

    def seal(self, path: Path) -> Path:
        """Seal `path` into `<path>.sealed` (written aside, synced, then renamed) and remove `path`."""
        sealed = sealed_log(path)
        kek_id = next(iter(self._keks))
        key_id, key = secrets.token_hex(8), AESGCM.generate_key(bit_length=256)
        header = {
            "kek_id": kek_id,
            "key_id": key_id,
            "wrapped": wrap(self._keks[kek_id], self._bound(key_id, path), key),
        }
        cipher = AESGCM(key)
        with _replacing(sealed) as out, path.open("rb") as src:
            out.write(MAGIC + json.dumps(header).encode() + b"\n")
            chunk, index = src.read(CHUNK), 0
            while True:
                following = src.read(CHUNK)
                nonce = secrets.token_bytes(12)
                body = nonce + cipher.encrypt(nonce, chunk, _frame_ad(key_id, index, not following))
                out.write(_LENGTH.pack(len(body)) + body)
                if not following:
                    break
                chunk, index = following, index + 1
        path.unlink()
        return sealed

    def read(self, sealed: Path) -> bytes:
        """The log's bytes; SealError naming the file when it was altered, cut short, moved, or its KEK is absent."""
        data = sealed.read_bytes()
        if not data.startswith(MAGIC):
            raise SealError(f"{sealed} is not a sealed attempt log (it does not start with {MAGIC!r})")
        line, _, rest = data[len(MAGIC) :].partition(b"\n")
        try:
            header = json.loads(line)
            kek_id, key_id, wrapped = str(header["kek_id"]), str(header["key_id"]), str(header["wrapped"])
        except (ValueError, KeyError, TypeError) as exc:
            raise SealError(f"{sealed}: its header is damaged ({exc})") from exc
        kek = self._keks.get(kek_id)
        if kek is None:
            raise SealError(
                f"{sealed} is sealed under the key-encryption key {kek_id}, but {self.source.describe()} "
                f"(key {', '.join(self._keks)}) is not it: read it with the {SETTING} (or admin key) it was "
                "sealed under, or re-wrap it with `alight data rotate-key --logs-dir` (an embedded run: `--run-dir`)"
            )
        try:
            cipher = AESGCM(unwrap(kek, self._bound(key_id, sealed), wrapped))
        except SealError as exc:
            raise SealError(
                f"{sealed} does not open as the log of attempt {log_name(sealed)}: moved or altered"
            ) from exc
        parts, index, offset = [], 0, 0
        while offset < len(rest):
            (size,) = _LENGTH.unpack_from(rest, offset)
            body = rest[offset + 4 : offset + 4 + size]
            offset += 4 + size
            try:
                parts.append(cipher.decrypt(body[:12], body[12:], _frame_ad(key_id, index, offset >= len(rest))))
            except (InvalidTag, ValueError) as exc:
                raise SealError(f"{sealed}: frame {index} was altered, or the file was cut short") from exc
            index += 1
        if index == 0:
            raise SealError(f"{sealed}: no frames: the file was cut short")
        return b"".join(parts)

    def rewrap(self, sealed: Path, new: LogSeal) -> bool:
        """Re-wrap the file's key under `new`'s KEK (frames untouched, the file replaced whole); False when it is
        under that KEK already. SealError naming the file when this seal's KEKs do not open it."""
        data = sealed.read_bytes()
        line, _, rest = data[len(MAGIC) :].partition(b"\n")
        header = json.loads(line)
        new_id = next(iter(new._keks))
        if header["kek_id"] == new_id:
            return False
        self.read(sealed)  # the whole file opens under the old KEK before its key moves (or SealError)
        key = unwrap(self._keks[header["kek_id"]], self._bound(header["key_id"], sealed), header["wrapped"])
        header = {
            **header,
            "kek_id": new_id,
            "wrapped": wrap(new._keks[new_id], self._bound(header["key_id"], sealed), key),
        }
        with _replacing(sealed) as out:
            out.write(MAGIC + json.dumps(header).encode() + b"\n" + rest)
        return True

    @staticmethod
    def _bound(key_id: str, path: Path) -> str:
        return f"{key_id}:{log_name(path)}"


@contextmanager
def _replacing(target: Path) -> Iterator[BinaryIO]:
    """A file (mode 600) written aside, synced, then renamed over `target`: a crash leaves the old file or the new."""
    tmp = target.with_name(target.name + ".tmp")
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as out:
        yield out
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, target)


def under_new_kek(sealed: Path, new: LogSeal) -> bool:
    """Whether the file's key is wrapped under `new`'s KEK already (a rotation skips it)."""
    with sealed.open("rb") as f:
        f.read(len(MAGIC))
        header = json.loads(f.readline())
    return header.get("kek_id") == next(iter(new._keks))


def open_attempt_log(path: Path, admin_key: str | None = None) -> str:
    """A sealed log's text for `alight logs` (entry point `alight.server: open_log`): the KEK from
    ALIGHT_DATA_KEY / ALIGHT_SECRET_KEY / the admin key, or an embedded run's own admin key (its stack.json)."""
    if admin_key is None:
        state = path.parent.parent.parent / "stack.json"  # <run>/logs/<rollout>/<n>.log.sealed
        with suppress(OSError, ValueError, AttributeError):  # none readable there: the key stays unknown
            admin_key = json.loads(state.read_text()).get("admin_key")
    return LogSeal(KekSource.default(admin_key)).read(path).decode("utf-8", errors="replace")
