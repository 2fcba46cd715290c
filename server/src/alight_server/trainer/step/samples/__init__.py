"""Sample builder: trajectories in, padded training rows out, without retokenizing (docs/samples.md)."""

from alight_server.trainer.step.samples.batch import SampleBatch
from alight_server.trainer.step.samples.build import SampleConfig, build_samples
from alight_server.trainer.step.samples.report import BuildReport

__all__ = ["BuildReport", "SampleBatch", "SampleConfig", "build_samples"]
