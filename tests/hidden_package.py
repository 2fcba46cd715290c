"""Code a child interpreter runs first to hide one of the project's packages, as where it was never installed."""

from __future__ import annotations

_TEMPLATE = """
import importlib.abc, importlib.machinery, sys

class Hidden(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == {module!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, Hidden())
_find = importlib.machinery.PathFinder.find_distributions
importlib.machinery.PathFinder.find_distributions = staticmethod(
    lambda *args, **kwargs: (d for d in _find(*args, **kwargs) if d.metadata["Name"] != {distribution!r})
)
"""


def without(module: str, distribution: str) -> str:
    """Python knows neither the module nor the distribution (so its entry points are gone too)."""
    return _TEMPLATE.format(module=module, distribution=distribution)
