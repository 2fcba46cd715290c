"""Loaded at start-up by the token-leak test: the Agents SDK's trace export goes to a loopback probe.

The SDK posts to a hard-coded https://api.openai.com/v1/traces/ingest; here the same exporter object
posts to $LEAK_PROBE_URL instead, so the test sees what would have left the machine.
"""

import os

from agents.tracing.processors import default_exporter

default_exporter().endpoint = os.environ["LEAK_PROBE_URL"]
