"""An OpenAI Agents SDK script as someone wrote it without alight: no decorator, no alight import.

It finds its model through OPENAI_BASE_URL / OPENAI_API_KEY like any OpenAI program; the question comes
from ALIGHT_TASK when it is set (a plain run asks a default one).
"""

import json
import os

from agents import Agent, ModelSettings, Runner

task = json.loads(os.environ.get("ALIGHT_TASK", '{"word": "apple"}'))
agent = Agent(
    name="speller",
    instructions="Spell the word you are given, letter by letter.",
    model="gpt-4.1-mini",
    model_settings=ModelSettings(max_tokens=24),
)
result = Runner.run_sync(agent, f"Spell {task['word']}.")
print(result.final_output)
