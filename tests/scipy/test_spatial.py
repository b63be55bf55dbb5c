"""tape.scipy.spatial.distance against scipy.spatial.distance: pdist and cdist of every
metric tape differentiates (with their weights and parameters) and squareform give SciPy's
values on plain arrays and on nodes, and gradients that match central differences."""

import numpy as np
import pytest

ssd = pytest.importorskip("scipy.spatial.distance")

from tape import Leaf, Tape  # noqa: E402
from tape.scipy.spatial import distance  # noqa: E402
from tests.fd import check_grads  # noqa: E402

RNG = np.random.default_rng(3)
XA = RNG.uniform(0.5, 2.0, (4, 3))
XB = RNG.uniform(0.5, 2.0, (2, 3))
WEIGHTS = np.array([0.5, 1.0, 2.0])
VI = np.linalg.inv(np.cov(RNG.uniform(size=(10, 3)), rowvar=False))

METRICS = {
    "sqeuclidean": {},
    "euclidean": {},
    "euclidean weighted": {"metric": "euclidean", "w": WEIGHTS},
    "cityblock": {},
    "chebyshev": {},
    "minkowski p=3": {"metric": "minkowski", "p": 3.0},
    "seuclidean": {"V": np.array([0.4, 1.0, 2.5])},
    "cosine": {},
    "correlation": {},
    "canberra": {},
    "braycurtis": {},
    "mahalanobis": {"VI": VI},
}


def _options(name):
    options = dict(METRICS[name])
    return options.pop("metric", name), options


@pytest.mark.parametrize("name", METRICS)
def test_pdist_and_cdist_give_scipys_values_on_nodes(name):
    metric, options = _options(name)
    t = Tape()
    np.testing.assert_allclose(
        distance.pdist(Leaf(t, XA), metric, **options).value,
        ssd.pdist(XA, metric, **options),
        rtol=1e-12,
    )
    np.testing.assert_allclose(
        distance.cdist(Leaf(t, XA), Leaf(t, XB), metric, **options).value,
        ssd.cdist(XA, XB, metric, **options),
        rtol=1e-12,
    )
    # on plain arrays too
    np.testing.assert_allclose(distance.cdist(XA, XB, metric, **options),
                               ssd.cdist(XA, XB, metric, **options))  # fmt: skip


@pytest.mark.parametrize("name", METRICS)
def test_pdist_and_cdist_gradients_match_central_differences(name):
    metric, options = _options(name)
    check_grads(lambda X: distance.pdist(X, metric, **options), XA, rtol=1e-5, atol=1e-7)
    check_grads(lambda A, B: distance.cdist(A, B, metric, **options), XA, XB, rtol=1e-5, atol=1e-7)


def test_a_callable_metric_and_squareform_as_scipy():
    def metric(u, v):
        return np.sum((u - v) ** 2) ** 0.25

    t = Tape()
    np.testing.assert_allclose(
        distance.cdist(Leaf(t, XA), XB, metric).value, ssd.cdist(XA, XB, metric), rtol=1e-12
    )
    condensed = ssd.pdist(XA)
    np.testing.assert_array_equal(
        distance.squareform(Leaf(t, condensed)).value, ssd.squareform(condensed)
    )
    check_grads(lambda X: distance.squareform(distance.pdist(X)), XA)
    check_grads(lambda d: distance.squareform(distance.squareform(d)), condensed)


def test_a_metric_tape_cannot_differentiate_is_refused_naming_the_ones_it_can():
    with pytest.raises(ValueError, match="differentiate the metrics"):
        distance.pdist(Leaf(Tape(), XA), "jensenshannon")
