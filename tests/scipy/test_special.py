"""tape.scipy.special: the differentiable special functions, multigammaln, and the
namespace that falls through to SciPy's own."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sp = pytest.importorskip("scipy.special")

from sensitivities import lookup  # noqa: E402
from tape import check_grad, grad, library_code  # noqa: E402
from tape.scipy import special  # noqa: E402
from tests.fd import check_grads  # noqa: E402
from tests.strategies import SHAPES, arrays  # noqa: E402


@settings(max_examples=10, deadline=None)
@given(d=st.integers(1, 4), a=SHAPES.flatmap(lambda s: arrays(s, 2.0, 6.0)))
def test_multigammaln_matches_scipy_and_finite_differences(d, a):
    np.testing.assert_allclose(special.multigammaln(a, d), sp.multigammaln(a, d))
    check_grads(lambda a: special.multigammaln(a, d), a)


def test_multigammaln_second_order_and_its_domain():
    check_grad(lambda a: special.multigammaln(a, 3), np.array([2.5, 4.0]), order=2)
    assert type(special.multigammaln(3.0, 2)) is type(sp.multigammaln(3.0, 2))
    with pytest.raises(ValueError, match="condition a"):
        special.multigammaln(0.4, 3)
    # SciPy's own computes the counterpart inside grad; with that off it names it
    assert grad(lambda a: sp.multigammaln(a, 2))(3.0)[0] == pytest.approx(
        sp.digamma(3.0) + sp.digamma(2.5)
    )
    with library_code(False), pytest.raises(
        TypeError, match="counterpart tape.scipy.special.multigammaln"
    ):
        grad(lambda a: sp.multigammaln(a, 2))(3.0)


def test_the_namespace():
    for name in special.__all__:
        f = getattr(special, name)
        if isinstance(f, np.ufunc):
            assert f is getattr(sp, name) and lookup(f).argnums, name
    expected = {"gammaln", "digamma", "betainc", "xlogy", "ndtr", "log_ndtr", "logsumexp",
                "softmax", "log_softmax", "multigammaln", "polygamma"}  # fmt: skip
    assert expected <= set(special.__all__)
    assert "floor" not in special.__all__ and special.gammasgn is sp.gammasgn
    (g,) = grad(lambda x: special.logsumexp(special.gammaln(x)))(np.array([1.5, 2.5]))
    w = sp.softmax(sp.gammaln([1.5, 2.5]))
    np.testing.assert_allclose(g, w * sp.digamma([1.5, 2.5]))
    with library_code(False), pytest.raises(
        TypeError, match="counterpart tape.scipy.special.logsumexp"
    ):
        grad(lambda x: sp.logsumexp(x))(np.ones(3))
