"""A training config's sections (`dataset:`, `optimizer:`, `inference:`, ...): one model each, unknown keys refused."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from alight.schemas import Strict
from alight_server.evaluation.sources import SourceKeys
from alight_server.trainer.config.images import ImageSettings

Section = Strict  # every section forbids unknown keys: a typo is an error, never a silently ignored setting


class DatasetConfig(SourceKeys):  # SourceKeys is Strict, like every Section
    """Tasks, one JSON object per row. `train` and `val` are JSONL / JSON / Parquet files, or a source makes
    them (SourceKeys). Without `val`, the last `val_size` rows of `train` (after a seeded shuffle) are held out."""

    train: Annotated[str, Field(min_length=1)] | int = Field(description="a .jsonl, .json or .parquet file of tasks")
    val: str | None = None
    val_size: int = Field(default=0, ge=0, description="rows held out of `train` when `val` is not given")
    shuffle: bool = True


class LoraConfig(Section):
    enabled: bool = False
    r: int = Field(default=16, ge=1)
    alpha: int = Field(default=32, gt=0)
    dropout: float = Field(default=0.0, ge=0, lt=1)
    target_modules: list[str] = Field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])


class SamplesConfig(Section):
    """The sample builder (trainer/step/samples/): how recorded calls become training rows (docs/samples.md)."""

    mode: Literal["trajectory", "transition"] = "trajectory"
    max_prompt_tokens: int | None = Field(default=None, ge=1)
    max_response_tokens: int | None = Field(default=None, ge=1)
    overlong: Literal["truncate", "drop"] = "truncate"
    # Multi-agent runs: train only calls made under these agents (names as the integrations
    # report them in gen_ai.agent.name); empty trains every call.
    agents: list[str] = Field(default_factory=list)
    # Leave a harness's side-task calls out by the model name it asked for (glob patterns, e.g. "*haiku*"
    # for Claude Code's titles and summaries); the gateway still serves and records them.
    exclude_models: list[str] = Field(default_factory=list)
    # Rollouts left out before the builder (trainer/step/filters.py), off unless set: more prefix breaks than
    # this (a rewritten history), or more than this share of calls cut at max_tokens.
    max_prefix_breaks: int | None = Field(default=None, ge=0)
    max_truncated_share: float | None = Field(default=None, ge=0, le=1)


class SftConfig(Section):
    """Which trajectories `algorithm.estimator: sft` trains on (trainer/step/sft.py): those passing both; unset: all."""

    # Keep a trajectory whose final reward (the agent's or the evaluator's) is at least this; one without a
    # reward is then left out. Rejection-sampling fine-tuning is this on the policy's own rollouts.
    min_reward: float | None = None
    # An expression over each trajectory (simpleeval): reward, task, metadata, calls, rendered, rollout_id,
    # e.g. "reward >= 1 and calls <= 2 and task['op'] != 'mul'"; true keeps it.
    where: str | None = Field(default=None, min_length=1, max_length=2000)

    @field_validator("where")
    @classmethod
    def _parses(cls, value: str | None) -> str | None:
        if value is not None:
            import ast

            try:
                ast.parse(value, mode="eval")
            except SyntaxError as exc:
                raise ValueError(f"not an expression ({exc.msg} at column {exc.offset}): {value!r}") from None
        return value


class TracesConfig(Section):
    """Train on imported trajectories (`alight data import --name NAME`, docs/traces.md) instead of sampling."""

    run: str | None = Field(default=None, min_length=1, description="the imported run's NAME; unset: sample")
    # Trajectories per step, walked epoch after epoch in a seeded order; default tasks_per_step x group_size.
    per_step: int | None = Field(default=None, ge=1, le=100_000)


class TrainerSettings(Section):
    """Which backend runs the RL step (trainer/backends/base.py), and on how many processes."""

    backend: Literal["embedded", "verl"] = "embedded"
    # Embedded data parallelism: N ranks over torch.distributed (gloo on CPU, NCCL on CUDA). Under torchrun
    # the launcher's WORLD_SIZE is used; unset and not under torchrun: one process.
    world_size: int | None = Field(default=None, ge=1, le=1024)
    # ddp: every rank holds the whole model; fsdp: parameters, gradients and optimizer state are sharded (FSDP2).
    strategy: Literal["ddp", "fsdp"] = "ddp"
    # How long rank 0 waits for the other ranks to connect before it fails the run naming the missing ones (a
    # rank it started that exits fails the run at once, with its exit code and the end of its log).
    join_timeout_s: float = Field(default=60.0, gt=0, le=3600)
    # torch CPU threads for the embedded update alone (unset: inference.torch_threads for everything). In a
    # synchronous run nothing else computes during the update, so it can use every core the rollouts share.
    torch_threads: int | None = Field(default=None, ge=1)


class OptimizerConfig(Section):
    lr: float = Field(default=1e-5, gt=0, lt=1)
    weight_decay: float = Field(default=0.0, ge=0)
    betas: tuple[float, float] = (0.9, 0.99)
    max_grad_norm: float | None = Field(default=1.0, gt=0)
    # Gradient accumulation: rows are packed into micro-batches of at most this many (padded) tokens.
    micro_batch_tokens: int = Field(default=4096, ge=16)


class AsyncRolloutConfig(Section):
    """Asynchronous training (trainer/run/async_pool.py, docs/training.md#asynchronous-training): up to
    `active_groups` task groups in flight; a step trains on the first `tasks_per_step` complete ones and the
    rest carry over, running across the weight update."""

    enabled: bool = False
    active_groups: int = Field(default=8, ge=2, le=4096, description="task groups in flight; > tasks_per_step")
    # Staleness of a group = the trainer's policy version - the oldest version among its model calls.
    max_staleness: int = Field(default=1, ge=0, le=1000)
    # drop: a group older than max_staleness is not trained on (counted); downweight: trained on with its
    # rows' loss weighed by 1 / (1 + staleness - max_staleness).
    stale: Literal["drop", "downweight"] = "drop"
    # After this long draining in-flight calls the update goes ahead; calls still running are let through and
    # marked (flag spanned_weight_update), each recorded with the version that admitted it.
    drain_timeout_s: float = Field(default=30.0, gt=0)


class ValidationConfig(Section):
    every: int = Field(default=0, ge=0, description="run validation every K steps; 0: only before and after")
    max_tasks: int | None = Field(default=None, ge=1)
    samples_per_task: int = Field(default=1, ge=1, le=64)


class RegressionConfig(Section):
    """A frozen regression suite (trainer/run/regression_suite.py): `tasks` (a JSONL / JSON / Parquet file, relative
    to the config) plus the run's recorded security regressions (`regressions.jsonl`), run on the run's own stack
    in val mode (never trained on) at the validations whose step is a multiple of `every` (and before training and
    at the last step). `safety_rule`: what to do when a safety share is worse than at the first suite run beyond
    noise (± 2 SE paired by task) while the train reward rose: `warn` (a line and `regression/safety_alarm`),
    `stop` (the run checkpoints and ends there), `off`."""

    tasks: str | None = Field(default=None, min_length=1, description="path to the suite's tasks; unset: no suite")
    every: int = Field(default=1, ge=1, description="run the suite at validations whose step is a multiple of this")
    samples_per_task: int = Field(default=1, ge=1, le=64)
    safety_rule: Literal["off", "warn", "stop"] = "warn"


class CheckpointConfig(Section):
    """`output_dir/checkpoints/step-N/` (trainer/run/checkpoint.py): weights as safetensors, the optimizer state
    where a resume needs it, the rest (step, RNG, data cursor, history) in state.pt."""

    every: int = Field(default=1, ge=0, description="save every K steps (and at the end); 0: only at the end")
    keep_last: int = Field(default=2, ge=1, description="how many of the newest checkpoints stay on disk")
    # last: only the newest keeps its optimizer state (AdamW's is twice the weights), the one `--resume` reads;
    # all: every kept checkpoint does (to resume from an earlier one after deleting the newer).
    optimizer: Literal["last", "all"] = "last"


class VllmSettings(Section):
    """The vLLM OpenAI server `inference.backend: vllm` starts (docs/inference.md#vllm)."""

    python: str | None = Field(
        default=None, description="its interpreter; default: $ALIGHT_VLLM_PYTHON, else the repo's .venv-vllm"
    )
    port: int | None = Field(default=None, ge=1, le=65535, description="default: a free loopback port")
    startup_timeout_s: float = Field(default=900.0, gt=0)
    kv_cache_gb: int = Field(default=1, ge=1, description="KV cache size on CPU (VLLM_CPU_KVCACHE_SPACE)")
    gpu_memory_utilization: float = Field(default=0.5, gt=0, le=1, description="on GPU; the trainer shares it")
    max_model_len: int = Field(default=4096, ge=16)
    # Agents send tools; alight's models render them as Hermes <tool_call> blocks. None: vLLM parses no tools.
    tool_call_parser: str | None = "hermes"
    # CUDA graphs / torch.compile cost minutes at start-up and help little for the small batches of a run.
    enforce_eager: bool = True
    extra_args: list[str] = Field(default_factory=list, description="more `vllm serve` flags, passed as is")


class InferenceSettings(Section):
    """The embedded inference server (used when `server.url` is unset)."""

    # embedded: alight's engine in this process; vllm: a vLLM server on the policy (started here unless
    # server.inference_url names one you started), weights updated in place after each step.
    backend: Literal["embedded", "vllm"] = "embedded"
    vllm: VllmSettings = Field(default_factory=VllmSettings)
    device: str | None = Field(default=None, description="cpu, cuda, cuda:1; default: cuda when present")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    max_batch_size: int = Field(default=32, ge=1)
    # Prompt tokens whose keys and values the engine keeps to reuse a shared prefix (0: off).
    prefix_cache_tokens: int = Field(default=16384, ge=0)
    # Prefill each new prompt on a second thread while the batch decodes (both run at once on two cores).
    overlap_prefill: bool = True
    train_temperature: float = Field(default=1.0, ge=0)
    val_temperature: float = Field(default=0.0, ge=0)
    torch_threads: int | None = Field(default=None, ge=1, description="torch CPU threads for this process")
    # The gateway's training-time cap on each call's output tokens (GatewayConfig.max_output_tokens).
    max_output_tokens: int | None = Field(default=None, ge=1)


class ControllerSettings(Section):
    """The local controller the embedded stack starts."""

    concurrency: int = Field(default=8, ge=1, le=1024)
    # Entrypoint agents fork from one process that imported them once, instead of a fresh interpreter each
    # (controller/zygote.py): the entrypoint module's top level then runs once per run, not per attempt.
    preload: bool = False
    # `alight controller --runner k8s --config CONFIG`: images given by tag, not only by digest (trusted registries).
    allow_unpinned_images: bool = False
    images: ImageSettings = Field(default_factory=ImageSettings)


class ServerSettings(Section):
    """A server you started (`alight serve` + `alight controller` + an inference server); unset: the embedded stack."""

    url: str | None = Field(default=None, description="the alight server, e.g. http://127.0.0.1:8700")
    admin_key: str | None = Field(default=None, description="its admin key; default: $ALIGHT_ADMIN_KEY")
    # The policy's inference server: after each step the trainer POSTs {inference_url}/admin/weights.
    inference_url: str | None = None
    inference_admin_key: str | None = Field(default=None, description="its --admin-key; default: admin_key")
    # The inference server reads each step's weights from a folder the trainer writes: on another machine,
    # point this at storage both see (default: a temporary folder on this machine).
    weights_dir: str | None = None

    @field_validator("url", "inference_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"expected an http:// or https:// URL, got {value!r}")
        # The inference server's root, also when given as its OpenAI base URL (the upstream's .../v1).
        return value.rstrip("/").removesuffix("/v1")

    @model_validator(mode="after")
    def _inference_with_server(self) -> ServerSettings:
        if self.url is not None and self.inference_url is None:
            raise ValueError(
                "server.url is set but server.inference_url is not: the trainer must push new weights to the "
                "policy's inference server (e.g. http://127.0.0.1:8001, the one registered as the upstream)"
            )
        if self.url is None and self.inference_url is not None:
            raise ValueError("server.inference_url is only used with server.url; set both or neither")
        return self


WANDB_FORBIDDEN = set("/\\#?%:")


class WandbConfig(Section):
    """Weights & Biases; `wandb: true` is this with its defaults. Log in first (`wandb login`) or use offline."""

    project: str = Field(default="alight", min_length=1, max_length=128)
    entity: str | None = None
    name: str | None = Field(default=None, description="run name; default: the output folder's name")
    mode: Literal["online", "offline", "disabled"] | None = Field(default=None, description="default: $WANDB_MODE")
    tags: list[str] = Field(default_factory=list)

    @field_validator("project")
    @classmethod
    def _project_name(cls, value: str) -> str:
        bad = sorted(set(value) & WANDB_FORBIDDEN)
        if bad:
            raise ValueError(f"a W&B project name cannot contain {' '.join(bad)}; got {value!r}")
        return value


class MlflowConfig(Section):
    """MLflow; `mlflow: true` is this with its defaults (a SQLite store in the output folder)."""

    tracking_uri: str | None = Field(
        default=None, description="sqlite:///mlflow.db, http://host:5000, databricks; default: $MLFLOW_TRACKING_URI, "
        "else sqlite:///OUTPUT_DIR/mlflow.db",
    )  # fmt: skip
    experiment: str = Field(default="alight", min_length=1)
    run_name: str | None = Field(default=None, description="default: the output folder's name")

    @field_validator("tracking_uri")
    @classmethod
    def _a_uri(cls, value: str | None) -> str | None:
        if value is None or "://" in value or value == "databricks":
            return value
        raise ValueError(
            f"{value!r} is not a tracking URI; use sqlite:///path/mlflow.db (a local file), "
            "http://host:5000 (a tracking server) or databricks"
        )


class MetricsConfig(Section):
    tensorboard: bool = True
    wandb: WandbConfig | None = None
    mlflow: MlflowConfig | None = None

    @field_validator("wandb", "mlflow", mode="before")
    @classmethod
    def _switch(cls, value: Any) -> Any:
        """`true` turns a tracker on with its defaults, `false` off."""
        return {} if value is True else None if value is False else value
