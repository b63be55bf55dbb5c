"""Implementations of NumPy functions whose family is array creation (``shape``), kept in
a module of their own: ``geomspace``, through ``linspace`` of the logarithms, as NumPy
computes it, with NumPy's handling of negative and complex endpoints.

>>> import numpy as np
>>> from tape import grad
>>> round(grad(lambda a: np.sum(np.geomspace(a, 8.0, 4)))(1.0)[0], 6)  # 1, 2, 4, 8
3.666667
"""

import operator

import numpy as np

from .registry import implementation, is_node, value_of


def _as(x, dtype):
    return x.astype(dtype) if is_node(x) else np.asarray(x, dtype=dtype)


# NumPy's writes into an array in place, on a node: its recorded writes (x.put, x[...] = v)


@implementation(np.place)
def _place(arr, mask, vals):
    # the first count(mask) of vals, repeated as needed, where mask is True, in order
    where = np.flatnonzero(np.asarray(value_of(mask), dtype=bool))
    flat = np.ravel(vals)
    if where.size and np.size(value_of(flat)) == 0:
        raise ValueError("Cannot insert from an empty array!")  # as NumPy says it
    if where.size:
        arr.put(where, flat[np.arange(where.size) % np.size(value_of(flat))])


@implementation(np.putmask)
def _putmask(a, mask, values):
    # a.flat[n] = values.flat[n % size] where mask.flat[n]: by position, not by count
    where = np.flatnonzero(np.broadcast_to(np.asarray(value_of(mask), dtype=bool), np.shape(a)))
    flat = np.ravel(values)
    if where.size:
        a.put(where, flat[where % np.size(value_of(flat))])


@implementation(np.put)
def _put(a, ind, v, mode="raise"):
    a.put(ind, v, mode=mode)


@implementation(np.geomspace)
def _geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    # NumPy's steps: rotate start to the positive real axis (a sign, held constant: the
    # result is start^(1 - s) stop^s on one branch), space the base-10 logarithms evenly,
    # put start and stop back exactly at the ends, rotate back
    num = operator.index(num)
    start_v, stop_v = np.asanyarray(value_of(start)), np.asanyarray(value_of(stop))
    if np.any(start_v == 0) or np.any(stop_v == 0):
        raise ValueError("Geometric sequence cannot include zero")
    dt = np.result_type(start_v, stop_v, float(num), np.zeros((), dtype))
    dtype = dt if dtype is None else np.dtype(dtype)
    sign = np.sign(start_v.astype(dt))
    start, stop = _as(start, dt) / sign, _as(stop, dt) / sign
    y = np.linspace(np.log10(start), np.log10(stop), num, endpoint=endpoint)
    result = np.power(10.0, y)
    if num > 0:
        ends = np.shape(result)[1:]
        parts = [np.expand_dims(np.broadcast_to(start, ends), 0), result[1:]]
        if num > 1 and endpoint:
            parts = [parts[0], result[1:-1], np.expand_dims(np.broadcast_to(stop, ends), 0)]
        result = np.concatenate(parts)
    result = result * sign
    if axis != 0:
        result = np.moveaxis(result, 0, axis)
    return result.astype(dtype)
