"""The ChatML chat template with Hermes-style tools that alight installs on models that lack one."""

from __future__ import annotations

# ChatML turns (`<|im_start|>role\n...<|im_end|>\n`). Tools follow the Hermes convention that vLLM's
# `hermes` tool parser reads back: signatures as JSON lines inside <tools></tools> in the system turn,
# calls as <tool_call>{"name": ..., "arguments": {...}}</tool_call> in assistant turns, and results as
# <tool_response> blocks inside one user turn per run of consecutive tool messages.
# Jinja whitespace control ({%- -%}) keeps the rendering byte-exact; `default_system` is filled in per model.
_TEMPLATE = """\
{%- set default_system = DEFAULT_SYSTEM -%}
{%- if messages and messages[0]['role'] == 'system' -%}
  {%- set system_text = messages[0]['content'] -%}
  {%- set rest = messages[1:] -%}
{%- else -%}
  {%- set system_text = default_system -%}
  {%- set rest = messages -%}
{%- endif -%}
{%- if tools -%}
  {{- '<|im_start|>system\\n' -}}
  {%- if system_text -%}{{- system_text + '\\n\\n' -}}{%- endif -%}
  {{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n' -}}
  {{- 'You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' -}}
  {%- for tool in tools -%}{{- '\\n' + (tool | tojson) -}}{%- endfor -%}
  {{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments '
      'within <tool_call></tool_call> XML tags:\\n<tool_call>\\n'
      '{\"name\": <function-name>, \"arguments\": <args-json-object>}\\n</tool_call><|im_end|>\\n' -}}
{%- elif system_text -%}
  {{- '<|im_start|>system\\n' + system_text + '<|im_end|>\\n' -}}
{%- endif -%}
{%- for message in rest -%}
  {%- if message['role'] == 'tool' -%}
    {%- if loop.first or rest[loop.index0 - 1]['role'] != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}
    {{- '\\n<tool_response>\\n' + message['content'] + '\\n</tool_response>' -}}
    {%- if loop.last or rest[loop.index0 + 1]['role'] != 'tool' -%}{{- '<|im_end|>\\n' -}}{%- endif -%}
  {%- elif message['role'] == 'assistant' -%}
    {{- '<|im_start|>assistant\\n' -}}
    {%- if message['content'] -%}{{- message['content'] -}}{%- endif -%}
    {%- for call in (message['tool_calls'] or []) -%}
      {%- set fn = call['function'] if call['function'] is defined else call -%}
      {%- if loop.first and message['content'] -%}{{- '\\n' -}}{%- elif not loop.first -%}{{- '\\n' -}}{%- endif -%}
      {{- '<tool_call>\\n{\"name\": \"' + fn['name'] + '\", \"arguments\": ' -}}
      {%- if fn['arguments'] is string -%}{{- fn['arguments'] -}}{%- else -%}{{- fn['arguments'] | tojson -}}{%- endif -%}
      {{- '}\\n</tool_call>' -}}
    {%- endfor -%}
    {{- '<|im_end|>\\n' -}}
  {%- else -%}
    {{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}
"""


def chatml_tools_template(default_system: str = "") -> str:
    """The template text with `default_system` used when the conversation brings no system turn."""
    return _TEMPLATE.replace("DEFAULT_SYSTEM", repr(default_system))
