"""How faithful the rendering was: each imported (rendered) call's token ids against the ids the gateway recorded
when the traces were generated, matched by conversation text. Prints one line of counts.

    python compare_ids.py --recorded sqlite:///runs/traces-proof/generate/alight.db \
        --imported sqlite:///runs/traces-proof/sft/alight.db --name quickstart.traces

Both stores are opened with ALIGHT_SECRET_KEY, as proof.sh sets it.
"""

from __future__ import annotations

import argparse

from alight.api_models import RolloutQuery
from alight_server.store import open_store
from alight_server.store.keys.kek import KekSource
from alight_server.trajectories.join import build_trajectory

Calls = list[tuple[list[int], list[int]]]


def conversations(db: str, prefix: str | None) -> dict[tuple[str, ...], Calls]:
    """(each call's request messages and reply, as text) -> each call's (prompt ids, response ids)."""
    store = open_store(db, KekSource.default())
    found: dict[tuple[str, ...], Calls] = {}
    try:
        for rollout in store.list_rollouts(RolloutQuery(limit=1000, id_prefix=prefix)):
            calls = build_trajectory(store, rollout.id).calls
            key = tuple(str(tc.call.request.get("messages")) + tc.output.text for tc in calls)
            found[key] = [(tc.call.prompt_token_ids, tc.call.response_token_ids) for tc in calls]
    finally:
        store.close()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--recorded", required=True)
    parser.add_argument("--imported", required=True)
    parser.add_argument("--name", required=True)
    args = parser.parse_args()
    recorded = conversations(args.recorded, None)
    imported = conversations(args.imported, f"{args.name}-")
    matched = [key for key in imported if key in recorded]
    pairs = [(mine, theirs) for key in matched for mine, theirs in zip(imported[key], recorded[key], strict=True)]
    prompts = sum(mine[0] == theirs[0] for mine, theirs in pairs)
    responses = sum(mine[1] == theirs[1] for mine, theirs in pairs)
    print(
        f"{len(matched)} of {len(imported)} imported trajectories found among the recorded ones; of their "
        f"{len(pairs)} calls, rendered prompt ids equal the recorded ones in {prompts}, response ids in {responses}"
    )


if __name__ == "__main__":
    main()
