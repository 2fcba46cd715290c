"""A script on the Anthropic client as someone wrote it without alight: no decorator, no alight import.

The client finds its endpoint and key in ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY.
"""

import json
import os

import anthropic

task = json.loads(os.environ.get("ALIGHT_TASK", '{"word": "apple"}'))
client = anthropic.Anthropic()
message = client.messages.create(
    model="claude-sonnet-4-5",
    max_tokens=24,
    system="Spell the word you are given, letter by letter.",
    messages=[{"role": "user", "content": f"Spell {task['word']}."}],
)
print("".join(block.text for block in message.content if block.type == "text"))
