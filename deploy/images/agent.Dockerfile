# Agent base image: the alight SDK and its framework integrations, nothing of the server.
# Build from the repository root:  docker build -f deploy/images/agent.Dockerfile -t alight-agent:0.1.0 .
# Then build your agent on it:     FROM alight-agent:0.1.0  /  COPY agent.py /app/  /  WORKDIR /app
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY alight ./alight
COPY integrations ./integrations
# Drop the integrations your agent does not use to make the image smaller.
RUN pip install . ./integrations/openai_agents ./integrations/langchain ./integrations/mcp && rm -rf /src
RUN useradd --uid 10001 --create-home agent
USER 10001
WORKDIR /app
# The controller sets the command of each attempt (python -m alight.entry agent.py:main, or the rollout's command).
