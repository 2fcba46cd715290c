#!/usr/bin/python3
"""A stand-in for a CLI agent in the harness sandbox: one Messages call through the relay, its answer's id written
to answer.txt, then, when the prompt says `fill the disk`, 16 MB files into the workspace until a write fails."""

import json
import os
import sys
import urllib.request

prompt = sys.argv[sys.argv.index("-p") + 1]
body = {"model": "policy", "max_tokens": 8, "messages": [{"role": "user", "content": prompt}]}
headers = {"content-type": "application/json", "x-api-key": os.environ["ANTHROPIC_API_KEY"]}
request = urllib.request.Request(os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages", json.dumps(body).encode(), headers)
answer = json.loads(urllib.request.urlopen(request, timeout=60).read())
with open("answer.txt", "w") as out:
    out.write(answer["id"])
if "fill the disk" in prompt:
    n = 0
    while True:
        with open(f"fill-{n}.bin", "wb") as out:
            out.write(b"\0" * (16 << 20))
        n += 1
