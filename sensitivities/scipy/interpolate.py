"""Differentiable counterparts of ``scipy.interpolate``: ``PPoly``, ``CubicSpline``,
``BSpline``, ``make_interp_spline`` and ``interp1d``, subclasses of SciPy's own (so that
``isinstance`` holds), differentiable in the points they are evaluated at and in the
data they are built from.

Two facts make this a composition, with no rule of its own:

- evaluation is a polynomial in the point within its piece (``PPoly``: Horner's scheme on
  the piece's coefficients; ``BSpline``: de Boor's recursion on the ``k + 1`` coefficients
  that touch the piece), so its derivative in the point is the spline's derivative, and
  in the coefficients a gather. The piece is found on plain values: it is constant almost
  everywhere.
- construction is affine in the data ``y`` for fixed positions ``x``: ``c = c0 + M y``,
  where ``M`` is SciPy's own construction applied to the columns of the identity and
  ``c0`` its construction from zero data (with the boundary values given). So the
  coefficients are SciPy's, for every boundary condition SciPy has (``not-a-knot``,
  ``natural``, ``clamped``, ``periodic``, derivative values), to rounding; ``M`` costs
  ``n`` columns of SciPy's solve and ``O(n^2)`` memory for ``n`` data points.

The positions ``x`` (and knots ``t``, boundary values) of a constructed spline are taken
as given: a node there is a ``TypeError`` naming it, never a silent constant. A ``PPoly``
or ``BSpline`` made directly from coefficients is differentiable in its breakpoints or
knots too. On plain values every call is SciPy's own.

>>> import numpy as np
>>> from sensitivities.scipy.interpolate import CubicSpline
>>> from tape import grad
>>> x = np.linspace(0.0, 3.0, 7)
>>> dy = grad(lambda y: CubicSpline(x, y)(1.25))(np.sin(x))[0]  # the spline's weights
>>> round(float(dy.sum()), 12)  # a constant is reproduced: the weights sum to one
1.0
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..registry import holds_node, is_node, value_of

try:
    import scipy.interpolate as _si
except ImportError:  # SciPy is optional: without it there is nothing here
    _si = None

__all__ = ["PPoly", "CubicSpline", "BSpline", "make_interp_spline", "interp1d"] if _si else []


# -- where SciPy keeps its arrays, and what holds a node -----------------------------------


def _get(obj: Any, name: str) -> Any:
    """The array ``name`` of a SciPy object: ``obj._c`` (SciPy >= 1.15, in slots), else
    ``obj.c``, read past the property that would convert it."""
    try:
        return object.__getattribute__(obj, "_" + name)
    except AttributeError:
        return obj.__dict__[name]


def _put(obj: Any, name: str, value: Any) -> None:
    """Store ``value`` (a node) where SciPy keeps the array ``name``, past its setter."""
    try:
        object.__getattribute__(obj, "_" + name)
    except AttributeError:
        obj.__dict__[name] = value
    else:
        object.__setattr__(obj, "_" + name, value)


def _data_holds_node(obj: Any) -> bool:
    if getattr(obj, "_holds_nodes", False):  # an interp1d made from nodes
        return True
    for name in ("c", "x", "t"):
        try:
            if is_node(_get(obj, name)):
                return True
        except (AttributeError, KeyError):
            continue
    return False


def _foreign(v: Any) -> bool:
    # an array of another kind that speaks NumPy's protocols (vmap's batches among them):
    # SciPy's compiled code would convert it, NumPy's functions here take it as it is
    return not isinstance(v, (np.ndarray, np.generic)) and hasattr(type(v), "__array_function__")


def meets_node(obj: Any, args: tuple, kwargs: dict) -> bool:
    """Whether a method call on ``obj`` meets a node (or a batch of ``vmap``): in its
    arguments or in the object's own arrays."""
    values = args + tuple(kwargs.values())
    return holds_node(values) or any(map(_foreign, values)) or _data_holds_node(obj)


def _plain(v: Any) -> Any:
    """``v``'s plain values, for SciPy's checks and layout. Under ``vmap`` that is a batch
    only NumPy's functions may touch: zeros of one example's shape stand in for it."""
    v = value_of(v)
    if isinstance(v, np.ndarray) or not hasattr(type(v), "__array_function__"):
        return v
    return np.zeros(np.shape(v))


def _array(v: Any) -> Any:
    """``v`` as one array: a node as it is, a list holding nodes stacked into one."""
    if is_node(v) or _foreign(v):
        return v
    if (type(v) is list or type(v) is tuple) and holds_node(v):
        return np.stack([_array(item) for item in v])
    return np.asarray(v)


def _refuse_nodes(where: str, **named: Any) -> None:
    for name, value in named.items():
        if holds_node(value):
            raise TypeError(
                f"{where} is differentiable in the data y and in the points it is evaluated "
                f"at, not in {name}: pass {name} as plain values (a PPoly or BSpline made from "
                "coefficients is differentiable in its breakpoints and knots)"
            )


def _take(table: Any, index: Any) -> Any:
    """``table[index]`` along the first axis. Under ``vmap`` the index may be a batch of
    its own, which indexing cannot take: a one-hot product gathers then."""
    if type(index) is np.ndarray:
        return table[index]
    rows = np.shape(table)[0]
    onehot = (index[..., None] == np.arange(rows)) * 1.0
    flat = np.reshape(table, (rows, -1))
    return np.reshape(onehot @ flat, np.shape(index) + np.shape(table)[1:])


def _column(v: Any, ndim: int) -> Any:
    """A vector of one value per point, shaped to broadcast against ``ndim``-d values."""
    return np.reshape(v, np.shape(v) + (1,) * (ndim - 1))


def _to_axis(out: Any, x_ndim: int, axis: int) -> Any:
    """SciPy's layout: the points' axes where the interpolation axis was."""
    if axis == 0:
        return out
    order = list(range(np.ndim(out)))
    moved = order[x_ndim : x_ndim + axis] + order[:x_ndim] + order[x_ndim + axis :]
    return np.transpose(out, moved)


def _safe_divide(num: Any, den: Any) -> Any:
    """``num / den``, 0 where the (plain) denominator is 0: a B-spline of empty support."""
    nonzero = np.asarray(value_of(den)) != 0
    return np.where(nonzero, num / np.where(nonzero, den, 1.0), 0.0)


def _falling(p: int, nu: int) -> float:
    """``p (p-1) ... (p-nu+1)``: the factor of ``s**(p-nu)`` in ``d^nu/ds^nu s**p``."""
    return float(math.prod(range(p - nu + 1, p + 1)))


def _points(x: Any) -> Any:
    if not (is_node(x) or type(x) is np.ndarray or _foreign(x)):
        x = np.asarray(x, dtype=float)
    return np.reshape(x, (-1,))


# -- piecewise polynomials -----------------------------------------------------------------


def ppoly_values(c: Any, breaks: Any, points: Any, nu: int = 0, extrapolate: Any = True) -> Any:
    """The ``nu``-th derivative of the piecewise polynomial ``c`` (``(k, m, ...)``, highest
    power first) on ``breaks`` (``m + 1``, increasing or decreasing) at ``points`` (1-d):
    ``(len(points), ...)``, as ``scipy.interpolate.PPoly`` evaluates it.

    >>> ppoly_values(np.array([[1.0], [0.0], [0.0]]), np.array([0.0, 2.0]), np.array([1.5]))
    array([2.25])
    """
    if nu < 0:
        raise ValueError("Order of derivative cannot be negative")
    order, pieces = np.shape(c)[:2]
    if extrapolate == "periodic":
        points = breaks[0] + np.mod(points - breaks[0], breaks[-1] - breaks[0])
        extrapolate = False
    plain = np.asarray(value_of(breaks), dtype=float)
    where = value_of(points)
    if plain[-1] < plain[0]:  # decreasing breakpoints: the same search, mirrored
        plain, where = -plain, -where
    piece = np.clip(np.searchsorted(plain, where, side="right") - 1, 0, pieces - 1)
    coefficients = _take(np.moveaxis(c, 1, 0), piece)  # (points, k, ...)
    s = _column(points - _take(breaks, piece), np.ndim(coefficients) - 1)
    out = None
    for j in range(order - nu):  # Horner's scheme on the derivative's coefficients
        term = coefficients[:, j] * _falling(order - 1 - j, nu)
        out = term if out is None else out * s + term
    if out is None:  # differentiated past the degree
        out = np.zeros_like(coefficients[:, 0])
    if not extrapolate:
        inside = (plain[0] <= where) & (where <= plain[-1])
        out = np.where(_column(inside, np.ndim(out)), out, np.nan)
    return out


def ppoly_derivative_coefficients(c: Any, nu: int = 1) -> Any:
    """The coefficients of the ``nu``-th derivative, as ``PPoly.derivative`` forms them."""
    order = np.shape(c)[0]
    if nu >= order:
        return np.zeros_like(c[:1])
    factors = np.array([_falling(order - 1 - j, nu) for j in range(order - nu)])
    return c[: order - nu] * _column(factors, np.ndim(c))


def ppoly_antiderivative_coefficients(c: Any, breaks: Any, nu: int = 1) -> Any:
    """The ``nu``-th antiderivative, continuous with its first ``nu - 1`` derivatives and
    zero (with them) at ``breaks[0]``, as ``PPoly.antiderivative`` forms it."""
    for _ in range(nu):
        order = np.shape(c)[0]
        powers = np.arange(order, 0, -1, dtype=float)  # each term's power once integrated
        integrated = c / _column(powers, np.ndim(c))
        h = _column(np.diff(breaks), np.ndim(c) - 1)
        # each piece's integral over its whole length: the next piece starts from the sum
        full = _piece_ends(integrated, h)
        starts = np.concatenate([np.zeros_like(full[:1]), np.cumsum(full, axis=0)[:-1]])
        c = np.concatenate([integrated, starts[None]])
    return c


def _piece_ends(integrated: Any, h: Any) -> Any:
    """Each piece's value at its right end, ``sum_j a_j h**(p_j)``, with no constant term:
    Horner's scheme with a trailing 0."""
    out = integrated[0]
    for j in range(1, np.shape(integrated)[0]):
        out = out * h + integrated[j]
    return out * h


def _integral(antiderivative: Callable, start: Any, end: Any, a: Any, b: Any,
              extrapolate: Any) -> Any:  # fmt: skip
    """``F(b) - F(a)`` for the antiderivative ``F(points)``; for ``'periodic'`` the whole
    periods and the rest, as SciPy splits them."""
    sign = 1.0
    if value_of(b) < value_of(a):
        a, b, sign = b, a, -1.0
    if extrapolate != "periodic":
        ends = antiderivative(np.stack([a, b]))
        return sign * (ends[1] - ends[0])
    period = end - start
    periods = float(np.floor(value_of((b - a) / period)))
    left = (b - a) - periods * period
    whole = antiderivative(np.stack([start, end]))
    total = periods * (whole[1] - whole[0])
    a = start + np.mod(a - start, period)
    b = a + left
    if value_of(b) <= value_of(end):
        ends = antiderivative(np.stack([a, b]))
        total = total + (ends[1] - ends[0])
    else:
        ends = antiderivative(np.stack([a, end * 1.0, start * 1.0, start + b - end]))
        total = total + (ends[1] - ends[0]) + (ends[3] - ends[2])
    return sign * total


# -- B-splines -----------------------------------------------------------------------------


def bspline_values(t: Any, c: Any, k: int, points: Any, nu: int = 0,
                   extrapolate: Any = True) -> Any:  # fmt: skip
    """The ``nu``-th derivative of the B-spline ``(t, c, k)`` at ``points`` (1-d):
    ``(len(points),) + c.shape[1:]``, as ``scipy.interpolate.BSpline`` evaluates it: the
    coefficients are differentiated ``nu`` times (Schumaker, Spline Functions, 5.3), then
    de Boor's recursion runs on the ``k + 1 - nu`` of them that touch the point's piece.

    >>> t = np.array([0.0, 0.0, 1.0, 2.0, 2.0])  # linear: the hat functions
    >>> bspline_values(t, np.array([0.0, 4.0, 0.0]), 1, np.array([0.5, 1.5]))
    array([2., 2.])
    """
    if nu < 0:
        raise ValueError("Order of derivative cannot be negative")
    plain = np.asarray(value_of(t), dtype=float)
    n = plain.size - k - 1
    if extrapolate == "periodic":
        points = t[k] + np.mod(points - t[k], t[n] - t[k])
        extrapolate = False
    where = value_of(points)
    piece = np.clip(np.searchsorted(plain, where, side="right") - 1, k, n - 1)
    coefficients = [_take(c, piece - k + a) for a in range(k + 1)]
    ndim = np.ndim(coefficients[0])

    def knot(offset):  # t[piece + offset], one per point
        return _column(_take(t, piece + offset), ndim)

    degree = k
    for _ in range(min(nu, k + 1)):
        coefficients = [
            degree * _safe_divide(coefficients[a] - coefficients[a - 1], knot(a) - knot(a - degree))
            for a in range(1, len(coefficients))
        ]
        degree -= 1
    if degree < 0:  # differentiated past the degree
        out = np.zeros_like(_take(c, piece))
    else:
        x = _column(points, ndim)
        for r in range(1, degree + 1):
            for a in range(degree, r - 1, -1):
                left, right = knot(a - degree), knot(a + 1 - r)
                alpha = _safe_divide(x - left, right - left)
                coefficients[a] = (1.0 - alpha) * coefficients[a - 1] + alpha * coefficients[a]
        out = coefficients[degree]
    if not extrapolate:
        inside = (plain[k] <= where) & (where <= plain[n])
        out = np.where(_column(inside, ndim), out, np.nan)
    return out


def _padded(t: Any, c: Any) -> Any:
    """FITPACK's convention: as many coefficients as knots, zeros at the end."""
    missing = np.shape(t)[0] - np.shape(c)[0]
    if missing <= 0:
        return c
    return np.concatenate([c, np.zeros_like(c[:1], shape=(missing,) + np.shape(c)[1:])])


def bspline_derivative_tck(t: Any, c: Any, k: int, nu: int = 1) -> tuple:
    """``(t, c, k)`` of the ``nu``-th derivative, as ``BSpline.derivative`` (FITPACK's
    ``splder``) forms them."""
    if nu > k:
        raise ValueError(f"Order of derivative (n = {nu!r}) must be <= order of spline "
                         f"(k = {k!r})")  # fmt: skip
    c = _padded(t, c)
    for _ in range(nu):
        dt = _column(t[k + 1 : -1] - t[1 : -k - 1], np.ndim(c))
        c = (c[1 : -1 - k] - c[: -2 - k]) * k / dt
        c = np.concatenate([c, np.zeros_like(c[:1], shape=(k,) + np.shape(c)[1:])])
        t, k = t[1:-1], k - 1
    return t, c, k


def bspline_antiderivative_tck(t: Any, c: Any, k: int, nu: int = 1) -> tuple:
    """``(t, c, k)`` of the ``nu``-th antiderivative, zero at ``t[0]``, as
    ``BSpline.antiderivative`` (FITPACK's ``splantider``) forms them."""
    c = _padded(t, c)
    for _ in range(nu):
        dt = _column(t[k + 1 :] - t[: -k - 1], np.ndim(c))
        c = np.cumsum(c[: -k - 1] * dt, axis=0) / (k + 1)
        c = np.concatenate([np.zeros_like(c[:1]), c] + [c[-1:]] * (k + 2))
        t = np.concatenate([t[:1], t, t[-1:]])
        k += 1
    return t, c, k


# -- construction: affine in the data --------------------------------------------------------


def _zero_side(side: Any, columns: int) -> Any:
    if side is None or isinstance(side, str):
        return side
    if isinstance(side[0], (int, np.integer)):  # CubicSpline's (order, value)
        return (side[0], np.zeros(columns))
    return [(order, np.zeros(columns)) for order, _ in side]  # make_interp_spline's pairs


def _zero_valued(bc: Any, columns: int) -> Any:
    """The boundary conditions ``bc`` with every derivative value 0, shaped for
    ``columns`` data columns: the linear part of the construction."""
    if bc is None or isinstance(bc, str):
        return bc
    return tuple(_zero_side(side, columns) for side in bc)


def _is_periodic(bc: Any) -> bool:
    return bc == "periodic" or (isinstance(bc, tuple) and "periodic" in [
        side for side in bc if isinstance(side, str)])  # fmt: skip


def _affine(build: Callable, y: Any, bc: Any) -> Any:
    """``build(data, bc)``'s coefficients (data along the first axis, as ``y``) as
    ``c0 + M y``: SciPy's construction from zero data, and from the identity's columns
    with the boundary values zeroed. Periodic data repeats its first point, so ``M`` acts
    on all but the last (whose gradient is its twin's, at ``y[0]``)."""
    n, rest = np.shape(y)[0], np.shape(y)[1:]
    c0 = build(np.zeros((n,) + rest), bc)
    if _is_periodic(bc):
        basis = np.concatenate([np.eye(n - 1), np.eye(n - 1)[:1]])  # y[-1] = y[0]
        y = y[:-1]
    else:
        basis = np.eye(n)
    columns = np.shape(basis)[1]
    M = build(basis, _zero_valued(bc, columns))  # (..., columns)
    flat = np.reshape(y, (columns, -1))
    c = np.reshape(M @ flat, np.shape(M)[:-1] + rest)
    return c0 + c


# -- the classes -----------------------------------------------------------------------------


def _either(ours: Callable, theirs: Callable) -> Callable:
    """A method that is ``ours`` where the call meets a node, SciPy's ``theirs`` else."""

    def method(self, *args, **kwargs):
        if meets_node(self, args, kwargs):
            return ours(self, *args, **kwargs)
        return theirs(self, *args, **kwargs)

    method.__name__ = theirs.__name__
    method.__doc__ = f"SciPy's ``{theirs.__qualname__}``; ours where the call meets a node."
    return method


def _array_property(scipy_class: type, name: str) -> property:
    """SciPy's property ``name`` (``c``, ``x``, ``t``), but a node is handed out as it is
    (SciPy's would convert it)."""
    base = getattr(scipy_class, name)

    def get(self):
        value = _get(self, name)
        return value if is_node(value) else base.fget(self)

    return property(get, base.fset, doc=base.__doc__)


def _new(cls: type, scipy_class: type, plain_args: tuple, **nodes: Any) -> Any:
    """An object of ``cls`` made by SciPy's ``construct_fast`` from plain values, with the
    arrays in ``nodes`` put in their place."""
    obj = scipy_class.construct_fast.__func__(cls, *plain_args)
    for name, value in nodes.items():
        _put(obj, name, value)
    return obj


def ppoly_init(self, c, x, extrapolate=None, axis=0):
    """``PPoly(c, x)`` with nodes: SciPy's checks on the plain values, then the nodes."""
    c, x = _array(c), _array(x)
    _si.PPoly.__init__(self, _plain(c), _plain(x), extrapolate, axis)
    if axis != 0:  # SciPy's layout: the coefficient and piece axes first
        c = np.moveaxis(np.moveaxis(c, axis + 1, 0), axis + 1, 0)
    _put(self, "c", c)
    _put(self, "x", x)


def ppoly_call(self, x, nu=0, extrapolate=None):
    """``PPoly.__call__``, differentiable in ``x`` and in the coefficients."""
    if extrapolate is None:
        extrapolate = self.extrapolate
    c = _get(self, "c")
    out = ppoly_values(c, _get(self, "x"), _points(x), nu, extrapolate)
    out = np.reshape(out, np.shape(x) + np.shape(c)[2:])
    return _to_axis(out, np.ndim(x), self.axis)


def ppoly_derivative(self, nu=1):
    """``PPoly.derivative``: a ``PPoly`` of the derivative's coefficients."""
    if nu < 0:
        return ppoly_antiderivative(self, -nu)
    c = _get(self, "c") if nu == 0 else ppoly_derivative_coefficients(_get(self, "c"), nu)
    return _new_ppoly(c, _get(self, "x"), self.extrapolate, self.axis)


def ppoly_antiderivative(self, nu=1):
    """``PPoly.antiderivative``: continuous, zero at the first breakpoint."""
    if nu <= 0:
        return ppoly_derivative(self, -nu)
    c = ppoly_antiderivative_coefficients(_get(self, "c"), _get(self, "x"), nu)
    extrapolate = False if self.extrapolate == "periodic" else self.extrapolate
    return _new_ppoly(c, _get(self, "x"), extrapolate, self.axis)


def ppoly_integrate(self, a, b, extrapolate=None):
    """``PPoly.integrate``: the definite integral, differentiable in ``a``, ``b`` and the
    coefficients."""
    if extrapolate is None:
        extrapolate = self.extrapolate
    breaks = _get(self, "x")
    c = ppoly_antiderivative_coefficients(_get(self, "c"), breaks, 1)

    def antiderivative(points):
        return ppoly_values(c, breaks, points, 0, False if extrapolate == "periodic"
                            else extrapolate)  # fmt: skip

    return _integral(antiderivative, breaks[0], breaks[-1], a, b, extrapolate)


def _new_ppoly(c, x, extrapolate, axis):
    plain = (np.asarray(_plain(c)), np.asarray(_plain(x)), extrapolate, axis)
    return _new(PPoly, _si.PPoly, plain, c=c, x=x)


def cubic_spline_init(self, x, y, axis=0, bc_type="not-a-knot", extrapolate=None):
    """``CubicSpline(x, y)`` with nodes in ``y``: SciPy's spline of the plain values (its
    checks, breakpoints and layout), then its coefficients as ``c0 + M y``."""
    _refuse_nodes("CubicSpline", x=x, bc_type=bc_type)
    y = _array(y)
    _si.CubicSpline.__init__(self, x, _plain(y), axis, bc_type, extrapolate)
    front = np.moveaxis(y, axis % np.ndim(y), 0)
    plain_x = np.asarray(x, dtype=float)

    def build(data, bc):
        return _si.CubicSpline(plain_x, data, bc_type=bc).c

    _put(self, "c", _affine(build, front, bc_type))


def bspline_init(self, t, c, k, extrapolate=True, axis=0):
    """``BSpline(t, c, k)`` with nodes: SciPy's checks on the plain values, then the
    nodes."""
    t, c = _array(t), _array(c)
    _si.BSpline.__init__(self, _plain(t), _plain(c), k, extrapolate, axis)
    _put(self, "c", np.moveaxis(c, self.axis, 0))
    _put(self, "t", t)


def bspline_call(self, x, nu=0, extrapolate=None):
    """``BSpline.__call__``, differentiable in ``x`` and in the coefficients."""
    if extrapolate is None:
        extrapolate = self.extrapolate
    c = _get(self, "c")
    out = bspline_values(_get(self, "t"), c, self.k, _points(x), nu, extrapolate)
    out = np.reshape(out, np.shape(x) + np.shape(c)[1:])
    return _to_axis(out, np.ndim(x), self.axis)


def _differentiated(self, nu):
    # FITPACK's splder for nu >= 0, its splantider for nu < 0, as SciPy's methods call them
    t, c, k = _get(self, "t"), _get(self, "c"), self.k
    return bspline_derivative_tck(t, c, k, nu) if nu >= 0 else bspline_antiderivative_tck(
        t, c, k, -nu)  # fmt: skip


def bspline_derivative(self, nu=1):
    """``BSpline.derivative``: the derivative's B-spline."""
    return _new_bspline(*_differentiated(self, nu), self.extrapolate, self.axis)


def bspline_antiderivative(self, nu=1):
    """``BSpline.antiderivative``: zero at the first knot."""
    extrapolate = False if self.extrapolate == "periodic" else self.extrapolate
    return _new_bspline(*_differentiated(self, -nu), extrapolate, self.axis)


def bspline_integrate(self, a, b, extrapolate=None):
    """``BSpline.integrate``: the definite integral, differentiable in ``a``, ``b`` and
    the coefficients (and knots)."""
    if extrapolate is None:
        extrapolate = self.extrapolate
    if value_of(b) < value_of(a):  # SciPy swaps the limits before it clips them
        return -bspline_integrate(self, b, a, extrapolate)
    t, k = _get(self, "t"), self.k
    n = np.shape(t)[0] - k - 1
    if extrapolate != "periodic" and not extrapolate:
        # SciPy integrates over the part of [a, b] inside the base interval only
        a = t[k] if value_of(a) < value_of(t[k]) else a
        b = t[n] if value_of(b) > value_of(t[n]) else b
        extrapolate = False
    ta, ca, ka = bspline_antiderivative_tck(t, _get(self, "c"), k, 1)

    def antiderivative(points):
        return bspline_values(ta, ca, ka, points, 0, False if extrapolate == "periodic"
                              else extrapolate)  # fmt: skip

    return _integral(antiderivative, t[k], t[n], a, b, extrapolate)


def _new_bspline(t, c, k, extrapolate, axis):
    plain = (np.asarray(_plain(t)), np.asarray(_plain(c)), k, extrapolate, axis)
    return _new(BSpline, _si.BSpline, plain, c=c, t=t)



def make_interp_spline(x, y, k=3, t=None, bc_type=None, axis=0, check_finite=True):
    """``scipy.interpolate.make_interp_spline``, differentiable in ``y``: a ``BSpline``
    whose coefficients are SciPy's, as ``c0 + M y``.

    >>> import numpy as np
    >>> from tape import grad
    >>> x = np.arange(6.0)
    >>> weights = grad(lambda y: make_interp_spline(x, y)(2.0))(np.zeros(6))[0]
    >>> np.round(weights, 12) + 0.0  # at a data point, the spline is that point's value
    array([0., 0., 1., 0., 0., 0.])
    """
    if not holds_node((x, y, t, bc_type)):
        return _si.make_interp_spline(x, y, k, t, bc_type, axis, check_finite)
    _refuse_nodes("make_interp_spline", x=x, t=t, bc_type=bc_type)
    y = _array(y)
    base = _si.make_interp_spline(x, _plain(y), k, t, bc_type, axis, check_finite)

    def build(data, bc):
        return _si.make_interp_spline(x, data, k, t, bc, 0, check_finite).c

    c = _affine(build, np.moveaxis(y, axis % np.ndim(y), 0), bc_type)
    return _new_bspline(base.t, c, base.k, base.extrapolate, base.axis)


def _broadcast_fill(value: Any, shape: tuple) -> Any:
    # SciPy's _check_broadcast_up_to, for a node: flattened to the data's other axes
    if np.size(value) != 1 and np.shape(value) != shape:
        value = np.ones(shape) * value
    return np.reshape(value, (-1,))


def interp1d_init(self, x, y, kind="linear", axis=-1, copy=True, bounds_error=None,
                  fill_value=np.nan, assume_sorted=False):  # fmt: skip
    """``interp1d(x, y)`` with nodes in ``y`` or ``fill_value``: SciPy's interpolant of
    the plain values (its checks, sorting and fill values), then the nodes in their
    place."""
    _refuse_nodes("interp1d", x=x)
    y = _array(y)
    SciPys = _si.interp1d.__init__
    SciPys(self, x, _plain(y), kind, axis, copy, bounds_error, value_of(fill_value),
           assume_sorted)  # fmt: skip
    if not assume_sorted:
        y = np.take(y, np.argsort(np.asarray(x), kind="mergesort"), axis=axis)
    self.y = y
    self._y = np.reshape(np.moveaxis(y, self.axis, 0), (len(self.x), -1))
    if self._kind == "spline":
        self._spline = make_interp_spline(self.x, self._y, k=self._spline.k, check_finite=False)
    extrapolating = isinstance(fill_value, str) and fill_value == "extrapolate"
    if extrapolating and kind in ("previous", "next"):  # SciPy fills with an end point
        end = np.take(y, -1 if kind == "previous" else 0, axis=self.axis)
        fill_value = (np.nan, end) if kind == "previous" else (end, np.nan)
    if not extrapolating or kind in ("previous", "next"):
        shape = self.y.shape[: self.axis] + self.y.shape[self.axis + 1 :] or (1,)
        pair = isinstance(fill_value, tuple) and len(fill_value) == 2
        below, above = fill_value if pair else (fill_value, fill_value)
        self._fill_value_below = _broadcast_fill(below, shape)
        self._fill_value_above = _broadcast_fill(above, shape)
    self._holds_nodes = True


def interp1d_call(self, x):
    """``interp1d.__call__``, differentiable in ``x`` (but for the piecewise constant
    kinds) and in the data and fill values."""
    points = _points(x)
    where = value_of(points)
    y, n, kind = self._y, len(self.x), self._kind
    if kind == "linear":
        hi = np.clip(np.searchsorted(self.x, where), 1, n - 1)
        x_lo, x_hi = _take(self.x, hi - 1), _take(self.x, hi)
        y_lo, y_hi = _take(y, hi - 1), _take(y, hi)
        out = (y_hi - y_lo) / (x_hi - x_lo)[:, None] * (points - x_lo)[:, None] + y_lo
    elif kind in ("nearest", "nearest-up"):
        out = _take(y, np.clip(np.searchsorted(self.x_bds, where, side=self._side), 0, n - 1))
    elif kind in ("previous", "next"):
        index = np.searchsorted(self._x_shift, where, side=self._side)
        out = _take(y, np.clip(index, 1 - self._ind, n - self._ind) + self._ind - 1)
    else:
        out = bspline_call(self._spline, points)
    if not self._extrapolate:
        below, above = where < self.x[0], where > self.x[-1]
        if self.bounds_error and np.any(below):
            raise ValueError(f"A value ({where[np.argmax(below)]}) in x_new is below the "
                             f"interpolation range's minimum value ({self.x[0]}).")  # fmt: skip
        if self.bounds_error and np.any(above):
            raise ValueError(f"A value ({where[np.argmax(above)]}) in x_new is above the "
                             f"interpolation range's maximum value ({self.x[-1]}).")  # fmt: skip
        out = np.where(below[:, None], self._fill_value_below,
                       np.where(above[:, None], self._fill_value_above, out))  # fmt: skip
    out = np.reshape(out, np.shape(x) + self._y_extra_shape)
    return _to_axis(out, np.ndim(x), self._y_axis)


if _si is not None:

    class _PiecewiseMethods:
        """``PPoly``'s methods and arrays, ours where a call meets a node."""

        c = _array_property(_si.PPoly, "c")
        x = _array_property(_si.PPoly, "x")
        __call__ = _either(ppoly_call, _si.PPoly.__call__)
        derivative = _either(ppoly_derivative, _si.PPoly.derivative)
        antiderivative = _either(ppoly_antiderivative, _si.PPoly.antiderivative)
        integrate = _either(ppoly_integrate, _si.PPoly.integrate)

    class PPoly(_PiecewiseMethods, _si.PPoly):
        """``scipy.interpolate.PPoly``, differentiable in its coefficients, breakpoints
        and the points it is evaluated at (``__call__``, ``derivative``,
        ``antiderivative``, ``integrate``; other methods are SciPy's, for plain values).

        >>> import numpy as np
        >>> from tape import grad
        >>> c = np.array([[1.0, 1.0], [0.0, 2.0]])  # x on [0, 1), 1 + (x - 1) after
        >>> grad(lambda c: PPoly(c, [0.0, 1.0, 2.0])(1.5))(c)[0]
        array([[0. , 0.5],
               [0. , 1. ]])
        """

        def __init__(self, c, x, extrapolate=None, axis=0):
            if holds_node((c, x)):
                ppoly_init(self, c, x, extrapolate, axis)
            else:
                super().__init__(c, x, extrapolate, axis)

    class CubicSpline(_PiecewiseMethods, _si.CubicSpline):
        """``scipy.interpolate.CubicSpline``, differentiable in ``y`` and in the points it
        is evaluated at, with every boundary condition of SciPy's.

        >>> import numpy as np
        >>> from tape import grad
        >>> x = np.linspace(0.0, 1.0, 5)
        >>> slope = grad(lambda p: CubicSpline(x, x**3)(p))(0.3)[0]
        >>> round(float(slope), 12)  # 3 p**2: the spline of a cubic is the cubic
        0.27
        """

        def __init__(self, x, y, axis=0, bc_type="not-a-knot", extrapolate=None):
            if holds_node((x, y, bc_type)):
                cubic_spline_init(self, x, y, axis, bc_type, extrapolate)
            else:
                super().__init__(x, y, axis, bc_type, extrapolate)

    class BSpline(_si.BSpline):
        """``scipy.interpolate.BSpline``, differentiable in its coefficients, knots and
        the points it is evaluated at (``__call__``, ``derivative``, ``antiderivative``,
        ``integrate``; other methods are SciPy's, for plain values).

        >>> import numpy as np
        >>> from tape import grad
        >>> t = np.array([0.0, 0.0, 0.0, 1.0, 1.0, 1.0])  # quadratic Bernstein basis
        >>> grad(lambda c: BSpline(t, c, 2)(0.5))(np.ones(3))[0]
        array([0.25, 0.5 , 0.25])
        """

        c = _array_property(_si.BSpline, "c")
        t = _array_property(_si.BSpline, "t")
        __call__ = _either(bspline_call, _si.BSpline.__call__)
        derivative = _either(bspline_derivative, _si.BSpline.derivative)
        antiderivative = _either(bspline_antiderivative, _si.BSpline.antiderivative)
        integrate = _either(bspline_integrate, _si.BSpline.integrate)

        def __init__(self, t, c, k, extrapolate=True, axis=0):
            if holds_node((t, c)):
                bspline_init(self, t, c, k, extrapolate, axis)
            else:
                super().__init__(t, c, k, extrapolate, axis)

        @property
        def tck(self):
            return self.t, self.c, self.k

    class interp1d(_si.interp1d):  # noqa: N801  (SciPy's name)
        """``scipy.interpolate.interp1d``, differentiable in ``y``, ``fill_value`` and the
        points it is evaluated at, for every ``kind`` (the piecewise constant ones have
        no derivative in the points), with SciPy's ``bounds_error`` and fill values.

        >>> import numpy as np
        >>> from tape import grad
        >>> grad(lambda y: interp1d([0.0, 1.0, 2.0], y)(0.25))(np.zeros(3))[0]
        array([0.75, 0.25, 0.  ])
        """

        def __init__(self, x, y, kind="linear", axis=-1, copy=True, bounds_error=None,
                     fill_value=np.nan, assume_sorted=False):  # fmt: skip
            if holds_node((x, y, fill_value)):
                interp1d_init(self, x, y, kind, axis, copy, bounds_error, fill_value,
                              assume_sorted)  # fmt: skip
            else:
                super().__init__(x, y, kind, axis, copy, bounds_error, fill_value, assume_sorted)

        __call__ = _either(interp1d_call, _si.interp1d.__call__)

    # SciPy's methods through which library code hands nodes to a spline, and ours:
    # ``tape.scipy.redirect`` puts ours in place for a call that meets a node while a pass
    # records (SciPy's own objects then hold the nodes, as ours do)
    METHODS = [
        (_si.PPoly, "__init__", ppoly_init),
        (_si.PPoly, "__call__", ppoly_call),
        (_si.PPoly, "derivative", ppoly_derivative),
        (_si.PPoly, "antiderivative", ppoly_antiderivative),
        (_si.PPoly, "integrate", ppoly_integrate),
        (_si.CubicSpline, "__init__", cubic_spline_init),
        (_si.BSpline, "__init__", bspline_init),
        (_si.BSpline, "__call__", bspline_call),
        (_si.BSpline, "derivative", bspline_derivative),
        (_si.BSpline, "antiderivative", bspline_antiderivative),
        (_si.BSpline, "integrate", bspline_integrate),
        (_si.interp1d, "__init__", interp1d_init),
        (_si.interp1d, "__call__", interp1d_call),
    ]
else:
    METHODS = []
