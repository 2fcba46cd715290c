"""Agent frameworks, unmodified, pointed at the gateway by base URL and key only.

Each drives a full tool loop against the fake upstream: the framework sees
exactly what the upstream produced and every call lands in the store with
the upstream's token ids.
"""

from __future__ import annotations

import pytest


def _assert_captured_exactly(gateway, attempt, fake, n_calls: int) -> list:
    calls = gateway.server.store.list_model_calls(attempt.rollout_id, attempt.attempt)
    assert len(calls) == len(fake.calls) == n_calls
    for call, produced in zip(calls, fake.calls, strict=True):
        assert call.status_code == 200 and call.flags == []
        assert call.prompt_token_ids == produced.response["prompt_token_ids"]
        assert call.response_token_ids == produced.response["choices"][0]["token_ids"]
        want = [e["logprob"] for e in produced.response["choices"][0]["logprobs"]["content"]]
        assert call.response_logprobs == want
    return calls


def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


@pytest.fixture
def agent_env(monkeypatch, attempt):
    """What the controller sets for an agent: OPENAI_BASE_URL and OPENAI_API_KEY."""
    from agents.models import openai_provider

    monkeypatch.setenv("OPENAI_BASE_URL", attempt.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", attempt.token)
    # The SDK keeps one process-wide httpx client; each test runs on its own event loop.
    monkeypatch.setattr(openai_provider, "_http_client", None)
    return attempt


@pytest.mark.harness(harness="OpenAI Agents SDK", api="responses", streamed=False, tools=True)
async def test_openai_agents_default_responses_model_runs_a_tool_loop(gateway, agent_env, fake):
    from agents import Agent, RunConfig, Runner, function_tool

    agent = Agent(name="weather", instructions="Use tools.", model="gpt-4.1", tools=[function_tool(get_weather)])
    result = await Runner.run(agent, 'call get_weather {"city": "Paris"}', run_config=RunConfig(tracing_disabled=True))
    assert result.final_output == fake.calls[-1].response["choices"][0]["message"]["content"]
    assert result.final_output.endswith("Tool results: sunny in Paris")
    calls = _assert_captured_exactly(gateway, agent_env, fake, 2)
    assert {c.flavour.value for c in calls} == {"responses"}


@pytest.mark.harness(harness="OpenAI Agents SDK", api="responses", streamed=True, tools=True)
async def test_openai_agents_streamed_run(gateway, agent_env, fake):
    from agents import Agent, RunConfig, Runner, function_tool

    agent = Agent(name="weather", model="gpt-4.1", tools=[function_tool(get_weather)])
    run = Runner.run_streamed(agent, 'call get_weather {"city": "Rome"}', run_config=RunConfig(tracing_disabled=True))
    async for _ in run.stream_events():
        pass
    assert run.final_output.endswith("Tool results: sunny in Rome")
    calls = _assert_captured_exactly(gateway, agent_env, fake, 2)
    assert all(c.streamed for c in calls)


@pytest.mark.harness(harness="OpenAI Agents SDK", api="chat", streamed=False, tools=True)
async def test_openai_agents_chat_completions_model(gateway, attempt, fake):
    from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=attempt.base_url, api_key=attempt.token)
    model = OpenAIChatCompletionsModel(model="gpt-4.1", openai_client=client)
    agent = Agent(name="weather", model=model, tools=[function_tool(get_weather)])
    result = await Runner.run(agent, 'call get_weather {"city": "Lima"}', run_config=RunConfig(tracing_disabled=True))
    assert result.final_output == fake.calls[-1].response["choices"][0]["message"]["content"]
    calls = _assert_captured_exactly(gateway, attempt, fake, 2)
    assert {c.flavour.value for c in calls} == {"chat"}


@pytest.mark.harness(harness="LangChain / LangGraph", api="chat", streamed=False, tools=True)
@pytest.mark.harness(harness="LangChain / LangGraph", api="chat", streamed=True, tools=False)
def test_langchain_chat_openai_invoke_stream_and_tools(gateway, attempt, fake):
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model="gpt-4o", base_url=attempt.base_url, api_key=attempt.token, max_retries=0)
    said = llm.invoke("Describe the sea").content
    assert said == fake.calls[-1].response["choices"][0]["message"]["content"]
    streamed = "".join(str(chunk.content) for chunk in llm.stream("Describe the sky"))
    assert streamed == fake.calls[-1].response["choices"][0]["message"]["content"]
    with_tools = llm.bind_tools([get_weather])
    question = HumanMessage('call get_weather {"city": "Oslo"}')
    ai = with_tools.invoke([question])
    [tool_call] = ai.tool_calls
    assert tool_call["name"] == "get_weather" and tool_call["args"] == {"city": "Oslo"}
    answer = with_tools.invoke([question, ai, ToolMessage(get_weather("Oslo"), tool_call_id=tool_call["id"])])
    assert str(answer.content).endswith("Tool results: sunny in Oslo")
    _assert_captured_exactly(gateway, attempt, fake, 4)


def _autogen_client(attempt):
    """AutoGen's OpenAI client pointed at the attempt's gateway URL, configured only by URL and key."""
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    return OpenAIChatCompletionClient(
        model="policy",
        base_url=attempt.base_url,
        api_key=attempt.token,
        model_info={
            "vision": False,
            "function_calling": True,
            "json_output": False,
            "family": "unknown",
            "structured_output": False,
        },
    )


@pytest.mark.harness(harness="AutoGen AgentChat", api="chat", streamed=False, tools=True)
async def test_autogen_assistant_agent_with_tool(gateway, attempt, fake):
    from autogen_agentchat.agents import AssistantAgent

    client = _autogen_client(attempt)
    agent = AssistantAgent("assistant", model_client=client, tools=[get_weather], reflect_on_tool_use=True)
    result = await agent.run(task='call get_weather {"city": "Kyiv"}')
    final = result.messages[-1]
    assert getattr(final, "content", None) == fake.calls[-1].response["choices"][0]["message"]["content"]
    _assert_captured_exactly(gateway, attempt, fake, 2)
    await client.close()


@pytest.mark.harness(harness="AutoGen AgentChat", api="chat", streamed=True, tools=False)
async def test_autogen_streaming_create(gateway, attempt, fake):
    from autogen_core.models import UserMessage

    client = _autogen_client(attempt)
    parts = [p async for p in client.create_stream([UserMessage(content="Tell me a fact", source="user")])]
    final = parts[-1]
    assert final.content == "".join(p for p in parts[:-1] if isinstance(p, str))
    assert final.content == fake.calls[-1].response["choices"][0]["message"]["content"]
    _assert_captured_exactly(gateway, attempt, fake, 1)
    await client.close()
