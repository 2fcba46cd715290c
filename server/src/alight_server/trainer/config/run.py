"""TrainConfig: everything one `alight train` run needs, read from YAML, validated with messages a person can act on."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from alight.cost import Prices
from alight.schemas import RunnerSpec
from alight_server.config import GatewayLimits
from alight_server.policies.routing import POLICY_NAME, GatewayRouting, RoutingConfig
from alight_server.trainer.backends.verl.settings import VerlSettings
from alight_server.trainer.config.algorithm import AlgorithmConfig
from alight_server.trainer.config.environment import tasks_from_environment
from alight_server.trainer.config.policies import (
    PolicyConfig,
    ResolvedPolicy,
    check_init_folders,
    check_policies,
    gateway_routing,
    resolve_policies,
)
from alight_server.trainer.config.review import ReviewConfig
from alight_server.trainer.config.sections import (
    AsyncRolloutConfig,
    CheckpointConfig,
    ControllerSettings,
    DatasetConfig,
    InferenceSettings,
    LoraConfig,
    MetricsConfig,
    OptimizerConfig,
    RegressionConfig,
    SamplesConfig,
    Section,
    ServerSettings,
    SftConfig,
    TracesConfig,
    TrainerSettings,
    ValidationConfig,
)
from alight_server.trainer.judge.config import JudgeConfig


class TrainConfig(Section):
    """One training run. Paths are relative to the config file's folder."""

    model: str = Field(min_length=1, description="registered name (tiny, smollm2-135m) or a local HF directory")
    dataset: DatasetConfig
    agent: RunnerSpec
    group_size: int = Field(default=4, ge=1, le=256, description="n rollouts per task: one GRPO group")
    tasks_per_step: int = Field(default=4, ge=1, le=4096)
    steps: int = Field(default=10, ge=0)
    seed: int = 0
    rollout_timeout_s: float = Field(default=300.0, gt=0)
    max_attempts: int = Field(default=2, ge=1, le=100)
    output_dir: str = "runs/alight"
    optimizer: OptimizerConfig = Field(default_factory=OptimizerConfig)
    lora: LoraConfig = Field(default_factory=LoraConfig)
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig)
    samples: SamplesConfig = Field(default_factory=SamplesConfig)
    sft: SftConfig = Field(default_factory=SftConfig)  # with algorithm.estimator: sft
    traces: TracesConfig = Field(default_factory=TracesConfig)
    trainer: TrainerSettings = Field(default_factory=TrainerSettings)
    validation: ValidationConfig = Field(default_factory=ValidationConfig)
    regression: RegressionConfig = Field(default_factory=RegressionConfig)  # a frozen suite, safety beside capability
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    async_rollout: AsyncRolloutConfig = Field(default_factory=AsyncRolloutConfig)
    review: ReviewConfig = Field(default_factory=ReviewConfig)  # queued rollouts: quarantine, drop or train
    inference: InferenceSettings = Field(default_factory=InferenceSettings)
    controller: ControllerSettings = Field(default_factory=ControllerSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    verl: VerlSettings = Field(default_factory=VerlSettings)  # used with trainer.backend: verl
    # The reward from outside the agent: "module:fn" / "file.py:fn" or a check command's argv
    # (alight_server/evaluation/evaluators.py); run by the server when an attempt ends as the agent's own outcome.
    # Or {source: NAME}: the task source's own scorer on the final answer (evaluation/sources.py).
    evaluator: str | list[str] | dict[str, str] | None = None
    # An environment served as MCP tools per attempt, its score the reward: {mcp: NAME, ...} (docs/environments.md)
    environment: dict[str, Any] | None = None
    tasks_from_environment = model_validator(mode="before")(tasks_from_environment)  # no dataset: its tasks
    # Several policies (docs/training.md#several-policies): name -> settings, and which calls each serves.
    # Unset: one policy, today's shape.
    policies: dict[str, PolicyConfig] = Field(default_factory=dict[str, PolicyConfig])
    routing: RoutingConfig | None = None
    # Budgets per attempt and rate limits per run and upstream, enforced at the gateway in the providers' error
    # shapes (docs/gateway.md "Budgets and rate limits"). Unset: none.
    limits: GatewayLimits = Field(default_factory=GatewayLimits)
    # What tokens, inference seconds and sandbox seconds cost (alight/cost.py): money in `alight eval`'s report,
    # each step's `cost/` metrics and the dashboard. Unset: tokens and seconds, no money.
    prices: Prices | None = None
    # An LLM judge as a reward source (docs/training.md "A judge"); unset: none.
    judge: JudgeConfig | None = None

    @field_validator("policies")
    @classmethod
    def _policy_names(cls, policies: dict[str, PolicyConfig]) -> dict[str, PolicyConfig]:
        for name in policies:
            if not re.match(POLICY_NAME, name):
                raise ValueError(f"policy name {name!r} must be 1-64 letters, digits, '.', '_' or '-' starting with a "
                                 "letter or digit: it is the model name the policy is served as")  # fmt: skip
        return policies

    def gateway_routing(self) -> GatewayRouting | None:
        """The gateway's routing for this run; None with one policy (the gateway's path is then today's)."""
        return gateway_routing(self.policies, self.routing)

    def resolved_policies(self) -> list[ResolvedPolicy]:
        """Each policy with its settings filled in from the top level; empty with one policy (today's shape)."""
        return resolve_policies(self.policies, self.model, self.lora, self.optimizer, self.algorithm)

    @model_validator(mode="after")
    def _sections_agree(self) -> TrainConfig:
        """The checks across sections, in this order: policies and routing (a judge model is a frozen policy), the
        agent has something to run, sft settings only with sft, async groups to carry over, one policy per teacher."""
        check_policies(self.policies, self.routing, self.model, self.lora, self.trainer.backend)
        name = self.judge.model if self.judge is not None else None
        if name is not None and (name not in self.policies or self.policies[name].trainable):
            raise ValueError(
                f"judge.model {name!r} must name a policy of this run with trainable: false (a frozen role the "
                f"run's inference server serves; policies: {sorted(self.policies) or 'none'}); or use "
                "judge.upstream / judge.url"
            )
        if not self.agent.entrypoint and not self.agent.command:
            raise ValueError("agent needs `entrypoint` ('module:function' or 'file.py:function') or `command` (argv)")
        # A setting given a value, not one merely present: a dumped config (run.json, the ranks' copy) names
        # every field, None included.
        given = sorted(name for name in type(self.sft).model_fields if getattr(self.sft, name) is not None)
        if self.algorithm.estimator != "sft" and given:
            raise ValueError(
                f"sft.{given[0]} selects what supervised fine-tuning trains on, but "
                f"algorithm.estimator is {self.algorithm.estimator!r}; set algorithm.estimator: sft or remove sft:"
            )
        if self.traces.run is not None and self.async_rollout.enabled:
            raise ValueError("traces.run trains on imported trajectories: nothing runs in flight; "
                             "remove async_rollout.enabled")  # fmt: skip
        pool = self.async_rollout
        if pool.enabled and pool.active_groups <= self.tasks_per_step:
            raise ValueError(
                f"async_rollout.active_groups ({pool.active_groups}) must be greater than tasks_per_step "
                f"({self.tasks_per_step}): the groups beyond one step's are the ones that carry over; "
                f"try active_groups: {2 * self.tasks_per_step}"
            )
        if self.policies and any(policy.algorithm.distill for policy in self.resolved_policies()):
            raise ValueError("algorithm.distill with policies: is not built (each policy's step would need the "
                             "teacher beside its adapter); train one policy with a teacher, or remove distill:")  # fmt: skip
        return self

    def run_dir_checkpoints(self) -> Path:
        return Path(self.output_dir) / "checkpoints"

    def resolve_paths(self, base: Path) -> TrainConfig:
        """A copy with dataset, output and agent paths made absolute against `base` (the config's folder)."""

        def absolute(value: str | None) -> str | None:
            if value is None or "://" in value:
                return value
            path = Path(value).expanduser()
            return str(path if path.is_absolute() else (base / path).resolve())

        agent = self.agent.model_copy(update={"cwd": absolute(self.agent.cwd or ".")})
        train = self.dataset.train  # a count with a source: other than jsonl
        dataset = self.dataset.model_copy(
            update={"train": absolute(train) if isinstance(train, str) else train, "val": absolute(self.dataset.val)}
        )
        metrics = self.metrics
        uri = metrics.mlflow.tracking_uri if metrics.mlflow is not None else None
        if metrics.mlflow is not None and uri is not None and uri.startswith("sqlite:///"):
            # sqlite:///runs/mlflow.db is relative like every other path; sqlite:////abs/mlflow.db stays
            mlflow = metrics.mlflow.model_copy(
                update={"tracking_uri": "sqlite:///" + str(absolute(uri.removeprefix("sqlite:///")))}
            )
            metrics = metrics.model_copy(update={"mlflow": mlflow})
        server = self.server.model_copy(update={"weights_dir": absolute(self.server.weights_dir)})
        policies = {
            name: policy.model_copy(update={"init_from": absolute(policy.init_from)})
            for name, policy in self.policies.items()
        }
        evaluator = self.evaluator
        if isinstance(evaluator, str) and evaluator.rpartition(":")[0].endswith(".py"):
            file, _, fn = evaluator.rpartition(":")
            evaluator = f"{absolute(file)}:{fn}"
        return self.model_copy(
            update={
                "evaluator": evaluator,
                "regression": self.regression.model_copy(update={"tasks": absolute(self.regression.tasks)}),
                "dataset": dataset,
                "agent": agent,
                "output_dir": absolute(self.output_dir),
                "metrics": metrics,
                "server": server,
                "policies": policies,
                "judge": self.judge.resolved(base) if self.judge is not None else None,
            }
        )

    def public_dump(self) -> dict[str, Any]:
        """The config as JSON for run.json and the trackers' params, with keys and every agent env value hidden
        (as the server answers them: a value handed to an agent on purpose is a secret until shown otherwise)."""
        data = self.model_dump(mode="json")
        for key in ("admin_key", "inference_admin_key"):
            if data["server"].get(key):
                data["server"][key] = "***"
        data["agent"]["env"] = dict.fromkeys(data["agent"].get("env") or {}, "***")
        return data


# Keys that moved to another section: an old config gets told where they went instead of "unknown key".
MOVED_KEYS = {
    ("algorithm", "sample_mode"): "samples.mode",
    ("algorithm", "max_prompt_tokens"): "samples.max_prompt_tokens",
    ("algorithm", "max_response_tokens"): "samples.max_response_tokens",
    ("algorithm", "agents"): "samples.agents",
}


class ConfigError(ValueError):
    """A config file that cannot be used; the message lists every problem with its key path."""


def describe_errors(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or "(top level)"
        moved = MOVED_KEYS.get(tuple(str(part) for part in error["loc"]))  # type: ignore[arg-type]
        if error["type"] == "extra_forbidden" and moved is not None:
            lines.append(f"  {where}: moved to {moved} (the sample builder has its own `samples:` section)")
        elif error["type"] == "extra_forbidden":
            lines.append(f"  {where}: unknown key (check the spelling; see docs/training.md for the keys)")
        else:
            got = f" (got {error['input']!r})" if "input" in error and not isinstance(error["input"], dict) else ""
            lines.append(f"  {where}: {error['msg']}{got}")
    return "\n".join(lines)


def parse_config(raw: Any, base: Path, source: str = "config") -> TrainConfig:
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: expected a mapping of keys at the top level, got {type(raw).__name__}")
    try:
        config = TrainConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{source} has {exc.error_count()} problem(s):\n{describe_errors(exc)}") from None
    config = config.resolve_paths(base)
    try:
        check_init_folders(config.policies)
    except ValueError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    return config


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> TrainConfig:
    """Read YAML at `path`, apply dotted `overrides` ({"optimizer.lr": 1e-5}), validate."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from None
    for dotted, value in (overrides or {}).items():
        apply_override(raw, dotted, value)
    return parse_config(raw, path.parent.resolve(), source=str(path))


def apply_override(raw: dict[str, Any], dotted: str, value: Any) -> None:
    node = raw
    *parents, leaf = dotted.split(".")
    for key in parents:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise ConfigError(f"cannot set {dotted!r}: {key!r} is {child!r}, not a section")
        node = child
    node[leaf] = value
