"""Imported by verl's worker processes (`actor_rollout_ref.model.external_lib`): registers alight's functions.

verl's Ray workers are separate processes; a registration made in the trainer's process does not
reach them. verl imports this module in each worker when it builds the model config, and the
import is the registration: the one module in alight with an import-time side effect, on purpose.
"""

from alight_server.trainer.backends.verl.registry import register

register()
