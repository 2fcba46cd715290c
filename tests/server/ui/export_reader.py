"""A trainer's reader of an alight-export file with the standard library alone (run with `python -I -S`).

Prints one JSON object: the header, the rollouts by id, the number of calls, and the training rows.
It checks what a trainer relies on: the format and version, and per row equal lengths of the per-token lists.
"""

import gzip
import json
import sys


def read(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        lines = [json.loads(line) for line in f if line.strip()]
    header, body = lines[0], lines[1:]
    if header.get("format") != "alight-export" or header.get("version") != 1:
        raise SystemExit(f"not an alight-export version 1 file: {header}")
    rollouts = {line["rollout_id"]: line for line in body if line["kind"] == "rollout"}
    calls = [line for line in body if line["kind"] == "call"]
    rows = [line for line in body if line["kind"] == "row"]
    for row in rows:
        per_token = [row.get(name) for name in ("input_ids", "loss_mask", "old_logprobs", "policy_versions")]
        lengths = {len(values) for values in per_token if values is not None}
        if len(lengths) != 1:
            raise SystemExit(f"row {row['rollout_id']}#{row['index']}: per-token lists differ in length {lengths}")
        if row["rollout_id"] not in rollouts:
            raise SystemExit(f"row of unknown rollout {row['rollout_id']}")
    return {"header": header, "rollouts": rollouts, "calls": len(calls), "rows": rows}


if __name__ == "__main__":
    json.dump(read(sys.argv[1]), sys.stdout)
