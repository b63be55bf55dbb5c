"""Helpers for the tests that sweep every rule family's cases."""

import numpy as np

from tape.transforms.grad import tree_flatten, tree_unflatten
from tests.sensitivities.test_coverage import all_cases

CASES = all_cases()


def defined_at(case, args):
    """Whether the case's function runs at the drawn point (its own test reports if not)."""
    try:
        with np.errstate(all="ignore"):
            case.call(*args)
    except Exception:
        return False
    return True


def smooth_at(case, args, h=1e-6):
    """Whether the case's function looks differentiable at the drawn point: its one-sided
    differences along a random direction agree. Next to a kink or a jump (a draw at
    1e-308 for abs, a point on np.interp's knots) they do not, and finite differences
    cannot judge a derivative there."""
    rng = np.random.default_rng(0)
    directions = {}
    for i in case.argnums:
        directions[i] = [rng.standard_normal(np.shape(x)) for x in tree_flatten(args[i])[0]]
    weights = [rng.standard_normal(np.shape(o)) for o in tree_flatten(case.call(*args))[0]]

    def along(t):
        moved = list(args)
        for i, ds in directions.items():
            leaves, treedef = tree_flatten(args[i])
            wide = [
                np.asarray(x, dtype=np.result_type(x, np.float64)) + t * d
                for x, d in zip(leaves, ds)
            ]
            moved[i] = tree_unflatten(treedef, wide)
        outs = tree_flatten(case.call(*moved))[0]
        return sum(np.real(np.sum(np.asarray(o) * w)) for o, w in zip(outs, weights))

    with np.errstate(all="ignore"):
        here = along(0.0)
        right, left = (along(h) - here) / h, (here - along(-h)) / h
    return bool(np.isfinite(right) and np.isfinite(left)) and abs(right - left) <= 1e-4 * (
        1 + abs(right) + abs(left)
    )
