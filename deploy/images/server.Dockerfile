# The alight server and controller: `alight serve` and `alight controller --runner k8s` from one image.
# Build from the repository root:  docker build -f deploy/images/server.Dockerfile -t alight-server:0.1.0 .
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY alight ./alight
COPY server ./server
# postgres: the store at scale; k8s: the Kubernetes runner. No torch here: training runs elsewhere.
RUN pip install . "./server[postgres,k8s]" && rm -rf /src
RUN useradd --uid 10001 --create-home alight
USER 10001
WORKDIR /home/alight
EXPOSE 8700
ENTRYPOINT ["alight"]
CMD ["serve", "--host", "0.0.0.0"]
