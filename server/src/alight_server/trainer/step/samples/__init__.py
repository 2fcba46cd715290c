"""Sample builder: trajectories in, padded training rows out, without retokenizing (docs/samples.md).

`build.py` runs the pipeline, `merge.py` merges calls into training rows, `breaks.py` says why a row broke,
`batch.py` pads rows into tensors, `report.py` counts what was kept and dropped.
"""

from alight_server.trainer.step.samples.batch import SampleBatch
from alight_server.trainer.step.samples.build import SampleConfig, build_samples
from alight_server.trainer.step.samples.report import BuildReport

__all__ = ["BuildReport", "SampleBatch", "SampleConfig", "build_samples"]
