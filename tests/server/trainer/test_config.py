"""TrainConfig: YAML in, clear messages for unknown keys and bad values, paths relative to the file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from alight_server.trainer.config.run import ConfigError, load_config

GOOD = """\
model: tiny
dataset: {train: tasks.jsonl, val_size: 2}
agent: {entrypoint: agent.py:main}
steps: 3
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def test_paths_resolve_against_the_config_folder(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, GOOD))
    assert config.dataset.train == str(tmp_path / "tasks.jsonl")
    assert config.agent.cwd == str(tmp_path)
    assert config.output_dir == str(tmp_path / "runs" / "alight")


def refusal(tmp_path: Path, extra: str) -> str:
    """The ConfigError's message for the good config plus `extra`."""
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, GOOD + extra))
    return str(info.value)


def test_unknown_keys_are_named_with_their_path(tmp_path: Path) -> None:
    message = refusal(tmp_path, "optimizer: {lr: 1.0e-5, learning_rate: 3}\nstpes: 4\n")
    assert "optimizer.learning_rate: unknown key" in message
    assert "stpes: unknown key" in message


def test_bad_values_name_the_key_and_the_value(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"group_size: .*greater than or equal to 1.*got 0"):
        load_config(write(tmp_path, GOOD + "group_size: 0\n"))
    with pytest.raises(ConfigError, match=r"algorithm.aggregation: .*got 'mean'"):
        load_config(write(tmp_path, GOOD + "algorithm: {aggregation: mean}\n"))


def test_a_price_table_is_read_and_its_mistakes_named_with_their_path(tmp_path: Path) -> None:
    prices = "prices: {tokens: {gpt-4o: {prompt: 2.5, completion: 10}}, device_second: 0.0008}\n"
    config = load_config(write(tmp_path, GOOD + prices))
    assert config.prices is not None and config.prices.tokens["gpt-4o"].completion == 10
    assert config.prices.device_second == 0.0008 and config.prices.sandbox_second == 0
    message = refusal(tmp_path, "prices: {tokens: {gpt-4o: {prompt: 2.5, output: 10}}, gpu_hour: 2}\n")
    assert "prices.tokens.gpt-4o.output: unknown key" in message and "prices.gpu_hour: unknown key" in message
    assert "prices.tokens.gpt-4o.completion: Field required" in message
    with pytest.raises(ConfigError, match=r"prices.device_second: .*greater than or equal to 0.*got -1"):
        load_config(write(tmp_path, GOOD + "prices: {device_second: -1}\n"))


def test_an_agent_needs_an_entrypoint_or_a_command(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="agent needs `entrypoint`"):
        load_config(write(tmp_path, GOOD.replace("agent: {entrypoint: agent.py:main}", "agent: {}")))


def test_overrides_use_dotted_keys_and_are_validated(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, GOOD), {"optimizer.lr": 0.001, "steps": 7})
    assert (config.optimizer.lr, config.steps) == (0.001, 7)
    with pytest.raises(ConfigError, match=r"optimizer\.lr"):
        load_config(write(tmp_path, GOOD), {"optimizer.lr": -1})


def test_missing_file_and_bad_yaml_are_reported(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(write(tmp_path, "model: [unclosed\n"))
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_config(write(tmp_path, "- a\n- b\n"))


def test_the_quickstart_config_is_valid() -> None:
    path = Path(__file__).parents[3] / "examples" / "quickstart" / "config.yaml"
    config = load_config(path)
    assert config.model == "smollm2-135m"
    assert Path(str(config.dataset.train)).is_file() and Path(str(config.dataset.val)).is_file()


def test_the_agent_filter_reaches_the_sample_builder(tmp_path: Path) -> None:
    from alight_server.trainer.step.samples import SampleConfig

    config = load_config(write(tmp_path, GOOD + "samples: {agents: [solver]}\n"))
    assert SampleConfig.from_section(config.samples).agents == ["solver"]
    assert SampleConfig.from_section(load_config(write(tmp_path, GOOD)).samples).agents == []


def test_sample_builder_keys_under_algorithm_point_to_the_samples_section(tmp_path: Path) -> None:
    message = refusal(tmp_path, "algorithm: {sample_mode: transition, max_response_tokens: 64}\n")
    assert "algorithm.sample_mode: moved to samples.mode" in message
    assert "algorithm.max_response_tokens: moved to samples.max_response_tokens" in message


def test_the_samples_section_reaches_the_sample_builder(tmp_path: Path) -> None:
    from alight_server.trainer.step.samples import SampleConfig

    config = load_config(write(tmp_path, GOOD + "samples: {mode: transition, max_prompt_tokens: 9, overlong: drop}\n"))
    built = SampleConfig.from_section(config.samples, pad_token_id=0)
    assert (built.mode, built.max_prompt_tokens, built.overlong) == ("transition", 9, "drop")


def test_the_builder_s_settings_are_the_samples_section_s_own_fields_and_checks() -> None:
    from alight_server.trainer.config.sections import SamplesConfig
    from alight_server.trainer.step.samples import SampleConfig

    assert issubclass(SampleConfig, SamplesConfig)
    assert set(SampleConfig.model_fields) - set(SamplesConfig.model_fields) == {"pad_token_id", "max_break_examples"}
    for name, field in SamplesConfig.model_fields.items():
        assert repr(SampleConfig.model_fields[name]) == repr(field), name  # the same type, default and checks


def test_every_builder_setting_of_the_samples_section_reaches_the_builder_unchanged() -> None:
    from alight_server.trainer.config.sections import SamplesConfig
    from alight_server.trainer.step.samples import SampleConfig

    section = SamplesConfig(
        mode="transition", max_prompt_tokens=9, max_response_tokens=17, overlong="drop",
        agents=["solver"], exclude_models=["*haiku*", "*mini*"],
    )  # fmt: skip
    filter_settings = {"max_prefix_breaks", "max_truncated_share"}  # the trajectory filter's (step/filters.py)
    assert set(section.model_fields_set) | filter_settings == set(SamplesConfig.model_fields)  # every one set
    built = SampleConfig.from_section(section, pad_token_id=3)
    for name in section.model_fields_set:
        assert getattr(built, name) == getattr(section, name), name
    assert built.pad_token_id == 3


def test_algorithm_settings_are_the_algorithms_own_definition(tmp_path: Path) -> None:
    from alight_server.trainer.step.algorithm import AlgorithmConfig

    config = load_config(write(tmp_path, GOOD + "algorithm: {step_reward_coef: 0.25}\n"))
    assert isinstance(config.algorithm, AlgorithmConfig)
    assert config.algorithm.step_reward_coef == 0.25
    assert config.algorithm.clip_high == AlgorithmConfig().clip_high == 0.28  # one default, not two


def test_async_rollout_needs_more_groups_in_flight_than_a_step_takes(tmp_path: Path) -> None:
    text = GOOD + "tasks_per_step: 4\nasync_rollout: {enabled: true, active_groups: 4}\n"
    with pytest.raises(
        ConfigError, match=r"active_groups \(4\) must be greater than tasks_per_step \(4\).*try active_groups: 8"
    ):
        load_config(write(tmp_path, text))
    with pytest.raises(ConfigError, match=r"async_rollout.stale: .*got 'skip'"):
        load_config(write(tmp_path, GOOD + "async_rollout: {enabled: true, stale: skip}\n"))
    # off, the setting is not checked against tasks_per_step
    assert not load_config(write(tmp_path, GOOD + "async_rollout: {active_groups: 2}\n")).async_rollout.enabled


def test_the_public_dump_hides_every_agent_env_value_but_keeps_the_names(tmp_path: Path) -> None:
    agent = (
        "agent: {entrypoint: agent.py:main, env: {DB_URL: 'postgres://u:pw@h/db', MODE: fast}, inherit_env: [HF_TOKEN]}"
    )
    config = load_config(write(tmp_path, GOOD.replace("agent: {entrypoint: agent.py:main}", agent)))
    dumped = config.public_dump()["agent"]
    assert dumped["env"] == {"DB_URL": "***", "MODE": "***"} and dumped["inherit_env"] == ["HF_TOKEN"]
    assert config.agent.env["DB_URL"] == "postgres://u:pw@h/db"  # the run itself still has it


def test_the_agent_config_refuses_to_inherit_alight_variables(tmp_path: Path) -> None:
    agent = "agent: {entrypoint: agent.py:main, inherit_env: [ALIGHT_ADMIN_KEY]}"
    with pytest.raises(ConfigError, match=r"agent.inherit_env.*ALIGHT_\* variables .* agent.env"):
        load_config(write(tmp_path, GOOD.replace("agent: {entrypoint: agent.py:main}", agent)))


def test_the_review_section_defaults_to_quarantine_and_refuses_bad_values(tmp_path: Path) -> None:
    review = load_config(write(tmp_path, GOOD)).review
    assert (review.flags, review.audit_share, review.max_staleness) == ("quarantine", 0.02, None)
    with pytest.raises(ConfigError, match=r"review.flags: .*got 'ignore'"):
        load_config(write(tmp_path, GOOD + "review: {flags: ignore}\n"))
    with pytest.raises(ConfigError, match=r"review.audit_share: .*less than or equal to 1.*got 1.5"):
        load_config(write(tmp_path, GOOD + "review: {audit_share: 1.5}\n"))
    with pytest.raises(ConfigError, match=r"review.audit_share: .*greater than or equal to 0"):
        load_config(write(tmp_path, GOOD + "review: {audit_share: -0.1}\n"))
    assert load_config(write(tmp_path, GOOD + "review: {flags: drop, audit_share: 0}\n")).review.flags == "drop"


def test_reading_a_config_does_not_import_torch() -> None:
    # `alight run --config` refuses a config it cannot serve before it starts anything: with torch imported by
    # the `algorithm:` section that refusal cost ~6 CPU-s instead of ~1.4 (measured on the 2-core test machine)
    code = "import sys; from alight_server.trainer.config.run import load_config; print(sorted({'torch'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]", f"reading a config imported {done.stdout.strip()}"
