"""The fall-through of every ``tape.scipy`` module: names without a counterpart are
SciPy's own (plain values only: on a node they raise the usual conversion error)."""

import importlib


def forward(scipy_module: str):
    """A module ``__getattr__`` that hands out ``scipy_module``'s attributes."""

    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(importlib.import_module(scipy_module), name)

    return __getattr__
