"""SmolLM2-135M-Instruct from its GGUF wheel, served end to end (slow: a real 135M model on CPU)."""

from __future__ import annotations

import openai
import pytest
import torch
from inference_testkit import API_KEY, forward_logprobs, render

from alight_server.inference.engine import InferenceEngine
from alight_server.inference.server import create_inference_app
from alight_server.stacks.server_thread import ServerThread

pytest.importorskip("gguf")


@pytest.mark.slow
def test_smollm2_answers_with_exact_token_ids_and_logprobs() -> None:
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    with InferenceEngine.from_model_name("smollm2-135m", device="cpu") as engine:
        with ServerThread(create_inference_app(engine, api_key=API_KEY)) as url:
            client = openai.OpenAI(base_url=f"{url}/v1", api_key=API_KEY, max_retries=0, timeout=120)
            response = client.chat.completions.create(
                model="smollm2-135m",
                messages=messages,  # type: ignore[arg-type]
                max_tokens=12,
                temperature=0,
                logprobs=True,
                extra_body={"return_token_ids": True},
            )
        extra = response.model_extra or {}
        ids = (response.choices[0].model_extra or {})["token_ids"]
        assert "Paris" in (response.choices[0].message.content or "")
        assert extra["prompt_token_ids"] == render(engine.tokenizer, messages)
        served = torch.tensor([e.logprob for e in response.choices[0].logprobs.content])  # pyright: ignore[reportOptionalIterable,reportOptionalMemberAccess]
        expected = forward_logprobs(engine.model, extra["prompt_token_ids"], ids)
        torch.testing.assert_close(served, expected, atol=1e-3, rtol=1e-3)
