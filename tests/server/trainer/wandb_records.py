"""Read an offline W&B run's `.wandb` file: a LevelDB-format log of wandb's own protobuf `Record`s.

wandb no longer ships a Python reader (its Go core writes and reads the file), so the tests decode
the framing here and parse every record with wandb's generated protobuf classes.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

BLOCK = 32 * 1024
FILE_HEADER = struct.Struct("<4sHB")  # b":W&B", magic 0xBEE1, version
RECORD_HEADER = struct.Struct("<IHB")  # crc32c, length, chunk type
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def read_records(path: Path) -> list[Any]:
    """Every `wandb_internal_pb2.Record` in the file, in order."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    ident, magic, _ = FILE_HEADER.unpack_from(data)
    assert (ident, magic) == (b":W&B", 0xBEE1), f"{path} is not a .wandb transaction log"
    records: list[Any] = []
    pending = b""
    pos = FILE_HEADER.size
    while pos + RECORD_HEADER.size <= len(data):
        left_in_block = BLOCK - pos % BLOCK
        if left_in_block < RECORD_HEADER.size:  # the block's tail is padding
            pos += left_in_block
            continue
        _, length, kind = RECORD_HEADER.unpack_from(data, pos)
        if kind == 0 and length == 0:  # zero padding up to the end of the written data
            break
        chunk = data[pos + RECORD_HEADER.size : pos + RECORD_HEADER.size + length]
        pos += RECORD_HEADER.size + length
        pending = chunk if kind in (FULL, FIRST) else pending + chunk
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()  # pyright: ignore[reportAttributeAccessIssue]  (generated)
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records


def history(records: list[Any]) -> dict[int, dict[str, Any]]:
    """{step: {key: value}} from the history records (W&B's own `_step`, `_runtime`... dropped)."""
    rows: dict[int, dict[str, Any]] = {}
    for record in records:
        if record.WhichOneof("record_type") != "history":
            continue
        items = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
        step = int(items.get("_step", record.history.step.num))
        rows.setdefault(step, {}).update({k: v for k, v in items.items() if not k.startswith("_")})
    return rows


def config(records: list[Any]) -> dict[str, Any]:
    """The run's config: what the run record started with, then any later config records."""
    values: dict[str, Any] = {}
    for record in records:
        kind = record.WhichOneof("record_type")
        updates = record.run.config.update if kind == "run" else record.config.update if kind == "config" else []
        for item in updates:
            values[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
    return values
