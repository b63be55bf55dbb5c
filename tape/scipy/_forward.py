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


def listing(scipy_module: str, own: list):
    """A module ``__dir__``: its counterparts ``own`` and SciPy's public names, which
    ``__getattr__`` hands out; not the imports and helpers the module uses itself."""

    def __dir__():
        scipy_names = dir(importlib.import_module(scipy_module))
        return sorted(set(own) | {name for name in scipy_names if not name.startswith("_")})

    return __dir__
