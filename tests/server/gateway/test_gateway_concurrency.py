"""Many agents at once: every call recorded once, under the attempt that made it, in its order."""

from __future__ import annotations

import asyncio

import openai


async def test_200_concurrent_calls_across_50_attempts_are_all_captured_and_attributed(gateway, fake):
    attempts = gateway.start_attempts(50)

    async def agent(i: int, a) -> list[str]:
        # Half the agents use their per-attempt URL, half the plain /v1 URL with the token alone.
        base = a.base_url if i % 2 == 0 else f"{gateway.url}/v1"
        client = openai.AsyncOpenAI(base_url=base, api_key=a.token, max_retries=0, timeout=60)
        try:
            seen = []
            for turn in range(4):
                content = f"attempt {a.rollout_id} turn {turn}"
                kwargs = {"stream": True} if turn % 2 else {}
                reply = await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": content}], **kwargs
                )
                if turn % 2:
                    seen.append("".join([c.choices[0].delta.content or "" async for c in reply if c.choices]))
                else:
                    seen.append(reply.choices[0].message.content)
            return seen
        finally:
            await client.close()

    # 50 agents x 4 sequential turns = 200 calls, 50 in flight at any moment.
    seen = await asyncio.gather(*(agent(i, a) for i, a in enumerate(attempts)))
    store = gateway.server.store
    total = 0
    for a, texts in zip(attempts, seen, strict=True):
        calls = store.list_model_calls(a.rollout_id, a.attempt)
        total += len(calls)
        assert [c.seq for c in calls] == [0, 1, 2, 3]
        assert [c.request["messages"][0]["content"] for c in calls] == [
            f"attempt {a.rollout_id} turn {t}" for t in range(4)
        ]
        assert [c.response["choices"][0]["message"]["content"] for c in calls] == texts
        assert all(c.status_code == 200 and c.response_token_ids for c in calls)
    assert total == len(fake.calls) == 200
