"""The config's `command` in the zero-change training test: becomes the unmodified agent script its task names.

One run then trains all three agents (a group each) at the price of one stack. `os.execv` replaces this
interpreter with a fresh one running the agent, under the same process id and environment the controller gave it.
"""

import json
import os
import sys
from pathlib import Path

task = json.loads(os.environ["ALIGHT_TASK"])
script = Path(__file__).parent / task["agent"]
os.execv(sys.executable, [sys.executable, str(script)])
