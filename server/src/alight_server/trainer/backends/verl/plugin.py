"""Imported by verl's worker processes (`actor_rollout_ref.model.external_lib`): registers alight's functions in
each worker, which a registration in the trainer's process does not reach; on purpose the one module in alight
with an import-time side effect."""

from alight_server.trainer.backends.verl.registry import register

register()
