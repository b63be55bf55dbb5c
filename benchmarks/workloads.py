"""The benchmark workloads, each written once per library, and the hand-written NumPy
gradient that is the limit (and the reference every library's gradient is checked against).

A workload is ``make(lib, quick) -> (run, check)``: ``run()`` computes the value and
the gradient once; ``check()`` returns the largest relative error of that library's
value and gradient against the hand-written ones.
"""

from __future__ import annotations

import math

import numpy as np

LIBRARIES = ("numpy", "tape", "tape-compiled", "autograd", "torch", "jax", "jax-jit")
HAND = "numpy"

CHAIN_ITERATIONS = 2000  # six ops each: sin, exp, +, log, *, +
OPS_PER_ITERATION = 6
RK4_SIZES = (2, 4, 10)  # a small-array loop: RK4 steps of dy/dt = tanh(A @ y), A n×n
RK4_STEPS = 50
RK4_H = 0.05


# -- data -----------------------------------------------------------------------------


def mlp_data(seed=0, batch=64, sizes=(64, 128, 10)):
    rng = np.random.default_rng(seed)
    params = [
        rng.standard_normal((sizes[0], sizes[1])) / math.sqrt(sizes[0]),
        rng.standard_normal(sizes[1]) * 0.1,
        rng.standard_normal((sizes[1], sizes[2])) / math.sqrt(sizes[1]),
        rng.standard_normal(sizes[2]) * 0.1,
    ]
    x = rng.standard_normal((batch, sizes[0]))
    y = np.eye(sizes[2])[rng.integers(0, sizes[2], batch)]
    return params, x, y


def matmul_data(n, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((n, n)) / math.sqrt(n) for _ in range(3)]


# -- hand-written gradients: the limit ----------------------------------------------------


def chain_hand(x, iterations, m=math):
    """The chain and its gradient by hand: ``m`` is ``math`` for a float, NumPy for arrays."""
    cos = m.cos
    xs, es = chain_hand_forward(x, iterations, m)
    x = xs.pop()
    g = 1.0 if m is math else np.ones_like(x)
    for i in range(iterations - 1, -1, -1):
        e = es[i]
        g = g + g * (0.01 * e / (e + 1)) * cos(xs[i])
    return (x if m is math else np.sum(x)), g


def chain_hand_forward(x, iterations, m=math):
    """The chain's values and what the hand-written gradient keeps of them: two lists of
    floats (no tuples, which the garbage collector would have to scan)."""
    sin, exp, log = m.sin, m.exp, m.log
    xs, es = [x], []
    for _ in range(iterations):
        e = exp(sin(x))
        es.append(e)
        x = x + 0.01 * log(e + 1)
        xs.append(x)
    return xs, es


def mlp_hand(params, x, y):
    w1, b1, w2, b2 = params
    n = x.shape[0]
    h = np.tanh(x @ w1 + b1)
    z = h @ w2 + b2
    z = z - np.max(z, axis=1, keepdims=True)
    e = np.exp(z)
    s = np.sum(e, axis=1, keepdims=True)
    loss = -np.sum(y * (z - np.log(s))) / n
    dz = (e / s * np.sum(y, axis=1, keepdims=True) - y) / n
    dh = (dz @ w2.T) * (1 - h * h)
    return loss, [x.T @ dh, np.sum(dh, axis=0), h.T @ dz, np.sum(dz, axis=0)]


def per_example_hand(params, x, y):
    """Per-example gradients of the MLP's loss by hand: the batch is a leading axis, and
    the per-example weight gradients are outer products, an ``einsum`` over the batch."""
    w1, b1, w2, b2 = params
    h = np.tanh(x @ w1 + b1)
    z = h @ w2 + b2
    z = z - np.max(z, axis=1, keepdims=True)
    e = np.exp(z)
    s = np.sum(e, axis=1, keepdims=True)
    dz = e / s * np.sum(y, axis=1, keepdims=True) - y
    dh = (dz @ w2.T) * (1 - h * h)
    return [np.einsum("bi,bj->bij", x, dh), dh, np.einsum("bi,bj->bij", h, dz), dz]


def matmul_hand(a, b, c):
    """sum(tanh(a @ b) @ c): the ones that sum sends back are used as such (structure)."""
    t = np.tanh(a @ b)
    value = np.sum(t @ c)
    dt = np.broadcast_to(np.sum(c, axis=1), t.shape)  # ones @ c.T
    dc = np.broadcast_to(np.sum(t, axis=0)[:, None], c.shape)  # t.T @ ones
    dp = dt * (1 - t * t)
    return value, [dp @ b.T, a.T @ dp, np.array(dc)]


def rk4_data(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, n)) / np.sqrt(n), rng.standard_normal(n)


def rk4_hand(a, y0, steps=RK4_STEPS, h=RK4_H):
    """0.5 * |y_T|² after ``steps`` RK4 steps of dy/dt = tanh(A @ y), and its gradient in
    (A, y0): the forward pass keeps each stage's input and output, the reverse pass runs
    the stages backwards."""
    y, saved = y0, []
    for _ in range(steps):
        k1 = np.tanh(a @ y)
        u2 = y + h / 2 * k1
        k2 = np.tanh(a @ u2)
        u3 = y + h / 2 * k2
        k3 = np.tanh(a @ u3)
        u4 = y + h * k3
        k4 = np.tanh(a @ u4)
        saved.append(((y, k1), (u2, k2), (u3, k3), (u4, k4)))
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    value = 0.5 * np.dot(y, y)
    ybar, abar = y, np.zeros_like(a)
    for stages in reversed(saved):
        kbars = [h / 6 * ybar, h / 3 * ybar, h / 3 * ybar, h / 6 * ybar]
        into = [None, h / 2, h / 2, h]  # stage s reads y + into[s] * k[s - 1]
        ybar = ybar.copy()
        for s in (3, 2, 1, 0):
            u, k = stages[s]
            zbar = kbars[s] * (1 - k * k)
            abar += np.outer(zbar, u)
            ubar = a.T @ zbar
            ybar += ubar
            if s:
                kbars[s - 1] = kbars[s - 1] + into[s] * ubar
    return value, [abar, ybar]


# -- the same functions per library ----------------------------------------------------------


def chain_fn(np_like):
    sin, exp, log = np_like.sin, np_like.exp, np_like.log

    def chain(x, iterations=CHAIN_ITERATIONS):
        for _ in range(iterations):
            x = x + 0.01 * log(exp(sin(x)) + 1)
        return x

    return chain


def mlp_fn(np_like, max_keepdims):
    def loss(params, x, y):
        w1, b1, w2, b2 = params
        h = np_like.tanh(x @ w1 + b1)
        z = h @ w2 + b2
        z = z - max_keepdims(z)
        logp = z - np_like.log(np_like.sum(np_like.exp(z), axis=1, keepdims=True))
        return -np_like.sum(y * logp) / x.shape[0]

    return loss


def per_example_loss(params, x, y, np_like=np):
    """The MLP's loss on one example (``x`` of shape (64,), ``y`` one-hot of shape (10,)),
    written for one example: ``vmap(grad(...))`` runs it over the batch."""
    w1, b1, w2, b2 = params
    h = np_like.tanh(x @ w1 + b1)
    z = h @ w2 + b2
    z = z - np_like.max(z)
    logp = z - np_like.log(np_like.sum(np_like.exp(z)))
    return -np_like.sum(y * logp)


def rk4_fn(np_like):
    tanh = np_like.tanh

    def loss(a, y, steps=RK4_STEPS, h=RK4_H):
        for _ in range(steps):
            k1 = tanh(a @ y)
            k2 = tanh(a @ (y + h / 2 * k1))
            k3 = tanh(a @ (y + h / 2 * k2))
            k4 = tanh(a @ (y + h * k3))
            y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return 0.5 * np_like.sum(y * y)

    return loss


def matmul_fn(np_like):
    return lambda a, b, c: np_like.sum(np_like.tanh(a @ b) @ c)


# -- one runner per (library, workload) ------------------------------------------------------


class Runner:
    """``run()`` does value and gradient once; ``result()`` is the last (value, grads) as
    NumPy; ``compile_s`` is set where the library compiles first."""

    compile_s: float | None = None

    def __init__(self, run, to_numpy=lambda r: r):
        self.run = run
        self.to_numpy = to_numpy
        self.last = None

    def __call__(self):
        self.last = self.run()
        return self.last

    def result(self):
        return self.to_numpy(self.last if self.last is not None else self.run())


def _flat(grads):
    out = []
    for g in grads if isinstance(grads, (list, tuple)) else [grads]:
        if isinstance(g, (list, tuple)):
            out += _flat(g)
        else:
            out.append(np.asarray(g, dtype=np.float64))
    return out


def relative_error(result, reference):
    value, grads = result
    rvalue, rgrads = reference
    errors = [abs(float(value) - float(rvalue)) / max(1.0, abs(float(rvalue)))]
    got, want = _flat(grads), _flat(rgrads)
    if len(got) != len(want):
        return math.inf
    for g, w in zip(got, want):
        if g.shape != w.shape:
            return math.inf
        errors.append(float(np.max(np.abs(g - w)) / max(1.0, float(np.max(np.abs(w))))))
    return max(errors)


def _jax():
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_platforms", "cpu")
    return jax


def _torch():
    import torch

    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set in this process
        pass
    return torch


def make_chain(lib, x0, iterations):
    """The scalar (x0 a float) or vector (x0 an array) chain: value and d value / d x0,
    the vector chain summed at the end."""
    vector = np.ndim(x0) > 0
    if lib == "numpy":
        return Runner(lambda: chain_hand(x0, iterations, np if vector else math))
    if lib in ("tape", "tape-compiled"):
        import tape

        chain = chain_fn(np)
        f = (lambda x: np.sum(chain(x, iterations))) if vector else (lambda x: chain(x, iterations))
        if lib == "tape":
            vg = tape.value_and_grad(f, argnums=0)
            return Runner(lambda: vg(x0))
        import time

        start = time.perf_counter()
        compiled = tape.compile_grad(f, x0, argnums=0)
        runner = Runner(lambda: compiled.value_and_grad(x0))
        runner.compile_s = time.perf_counter() - start
        return runner
    if lib == "autograd":
        import autograd
        import autograd.numpy as anp

        chain = chain_fn(anp)
        f = (
            (lambda x: anp.sum(chain(x, iterations)))
            if vector
            else (lambda x: chain(x, iterations))
        )
        vg = autograd.value_and_grad(f)
        return Runner(lambda: vg(x0))
    if lib == "torch":
        torch = _torch()
        chain = chain_fn(torch)

        def run():
            x = torch.tensor(x0, dtype=torch.float64, requires_grad=True)
            y = chain(x, iterations)
            y = y.sum() if vector else y
            (g,) = torch.autograd.grad(y, x)
            return y.detach(), g

        return Runner(run, lambda r: (r[0].item(), r[1].numpy()))
    if lib in ("jax", "jax-jit"):
        jax = _jax()
        import jax.numpy as jnp

        chain = chain_fn(jnp)
        f = (
            (lambda x: jnp.sum(chain(x, iterations)))
            if vector
            else (lambda x: chain(x, iterations))
        )
        return _jax_runner(jax, lib, jax.value_and_grad(f), (jnp.asarray(x0),))
    raise KeyError(lib)


def _jax_runner(jax, lib, vg, args):
    def block(r):
        return jax.block_until_ready(r)

    if lib == "jax-jit":
        import time

        start = time.perf_counter()
        compiled = jax.jit(vg).lower(*args).compile()
        runner = Runner(lambda: block(compiled(*args)), _jax_to_numpy)
        runner.compile_s = time.perf_counter() - start
        return runner
    return Runner(lambda: block(vg(*args)), _jax_to_numpy)


def _jax_to_numpy(r):
    value, grads = r
    return float(value), [
        np.asarray(g) for g in (grads if isinstance(grads, (list, tuple)) else [grads])
    ]


def make_mlp(lib):
    params, x, y = mlp_data()
    if lib == "numpy":
        return Runner(lambda: mlp_hand(params, x, y))
    if lib in ("tape", "tape-compiled"):
        import time

        import tape

        loss = mlp_fn(np, lambda z: np.max(z, axis=1, keepdims=True))
        if lib == "tape":
            vg = tape.value_and_grad(loss, argnums=0)
            return Runner(lambda: vg(params, x, y))
        start = time.perf_counter()
        compiled = tape.compile_grad(loss, params, x, y, argnums=0)
        runner = Runner(lambda: compiled.value_and_grad(params, x, y))
        runner.compile_s = time.perf_counter() - start
        return runner
    if lib == "autograd":
        import autograd
        import autograd.numpy as anp

        loss = mlp_fn(anp, lambda z: anp.max(z, axis=1, keepdims=True))
        vg = autograd.value_and_grad(loss)
        return Runner(lambda: vg(params, x, y))
    if lib == "torch":
        torch = _torch()
        loss = mlp_fn(torch, lambda z: torch.amax(z, dim=1, keepdim=True))
        tp = [torch.tensor(p) for p in params]
        tx, ty = torch.tensor(x), torch.tensor(y)

        def run():
            ps = [p.detach().requires_grad_() for p in tp]
            value = loss(ps, tx, ty)
            return value.detach(), torch.autograd.grad(value, ps)

        return Runner(run, lambda r: (r[0].item(), [g.numpy() for g in r[1]]))
    if lib in ("jax", "jax-jit"):
        jax = _jax()
        import jax.numpy as jnp

        loss = mlp_fn(jnp, lambda z: jnp.max(z, axis=1, keepdims=True))
        args = ([jnp.asarray(p) for p in params], jnp.asarray(x), jnp.asarray(y))
        return _jax_runner(jax, lib, jax.value_and_grad(loss), args)
    raise KeyError(lib)


def make_matmul(lib, n):
    a, b, c = matmul_data(n)
    if lib == "numpy":
        return Runner(lambda: matmul_hand(a, b, c))
    if lib in ("tape", "tape-compiled"):
        import time

        import tape

        f = matmul_fn(np)
        if lib == "tape":
            vg = tape.value_and_grad(f)
            return Runner(lambda: vg(a, b, c))
        start = time.perf_counter()
        compiled = tape.compile_grad(f, a, b, c)
        runner = Runner(lambda: compiled.value_and_grad(a, b, c))
        runner.compile_s = time.perf_counter() - start
        return runner
    if lib == "autograd":
        import autograd
        import autograd.numpy as anp

        vg = autograd.value_and_grad(matmul_fn(anp), argnum=(0, 1, 2))
        return Runner(lambda: vg(a, b, c))
    if lib == "torch":
        torch = _torch()
        f = matmul_fn(torch)
        ta, tb, tc = (torch.tensor(m) for m in (a, b, c))

        def run():
            ps = [m.detach().requires_grad_() for m in (ta, tb, tc)]
            value = f(*ps)
            return value.detach(), torch.autograd.grad(value, ps)

        return Runner(run, lambda r: (r[0].item(), [g.numpy() for g in r[1]]))
    if lib in ("jax", "jax-jit"):
        jax = _jax()
        import jax.numpy as jnp

        args = tuple(jnp.asarray(m) for m in (a, b, c))
        return _jax_runner(jax, lib, jax.value_and_grad(matmul_fn(jnp), argnums=(0, 1, 2)), args)
    raise KeyError(lib)


def make_per_example(lib):
    """Per-example gradients of the MLP (batch 64): ``vmap(grad(loss))`` in each library,
    the hand-written ``einsum`` in NumPy; ``tape-loop`` is a Python loop of ``tape.grad``
    calls, one per example; ``tape-compiled`` is ``vmap(compile_grad(loss, ...))``. The
    value checked is 0 (there is none), the gradients are."""
    params, x, y = mlp_data()
    if lib == "numpy":
        return Runner(lambda: per_example_hand(params, x, y), lambda r: (0.0, r))
    if lib in ("tape", "tape-loop", "tape-compiled"):
        import tape

        if lib == "tape":
            f = tape.vmap(tape.grad(per_example_loss, argnums=0), in_axes=(None, 0, 0))
            return Runner(lambda: f(params, x, y), lambda r: (0.0, r))
        if lib == "tape-compiled":  # one example's gradient compiled, then run over the batch
            import time

            start = time.perf_counter()
            compiled = tape.compile_grad(per_example_loss, params, x[0], y[0], argnums=0)
            f = tape.vmap(compiled, in_axes=(None, 0, 0))
            f(params, x, y)  # its tape on batched values: recorded once, replayed after
            runner = Runner(lambda: f(params, x, y), lambda r: (0.0, r))
            runner.compile_s = time.perf_counter() - start
            return runner
        g = tape.grad(per_example_loss, argnums=0)

        def loop():
            gs = [g(params, x[i], y[i]) for i in range(len(x))]
            return [np.stack([gi[k] for gi in gs]) for k in range(len(params))]

        return Runner(loop, lambda r: (0.0, r))
    if lib == "torch":
        torch = _torch()
        from torch.func import grad, vmap

        f = vmap(grad(lambda p, a, b: per_example_loss(p, a, b, torch)), in_dims=(None, 0, 0))
        tp = [torch.tensor(p) for p in params]
        tx, ty = torch.tensor(x), torch.tensor(y)

        def run():
            with torch.no_grad():
                return f(tp, tx, ty)

        return Runner(run, lambda r: (0.0, [g.numpy() for g in r]))
    if lib in ("jax", "jax-jit"):
        jax = _jax()
        import jax.numpy as jnp

        f = jax.vmap(jax.grad(lambda p, a, b: per_example_loss(p, a, b, jnp)), in_axes=(None, 0, 0))
        args = ([jnp.asarray(p) for p in params], jnp.asarray(x), jnp.asarray(y))
        if lib == "jax-jit":
            import time

            start = time.perf_counter()
            compiled = jax.jit(f).lower(*args).compile()
            runner = Runner(
                lambda: jax.block_until_ready(compiled(*args)),
                lambda r: (0.0, [np.asarray(g) for g in r]),
            )
            runner.compile_s = time.perf_counter() - start
            return runner
        return Runner(
            lambda: jax.block_until_ready(f(*args)), lambda r: (0.0, [np.asarray(g) for g in r])
        )
    raise KeyError(lib)


def make_rk4(lib, n):
    """The small-array loop: value and gradient in (A, y0) of ``rk4_fn``, A n×n."""
    a, y0 = rk4_data(n)
    if lib == "numpy":
        return Runner(lambda: rk4_hand(a, y0))
    if lib in ("tape", "tape-compiled"):
        import time

        import tape

        f = rk4_fn(np)
        if lib == "tape":
            vg = tape.value_and_grad(f, argnums=(0, 1))
            return Runner(lambda: vg(a, y0))
        start = time.perf_counter()
        compiled = tape.compile_grad(f, a, y0, argnums=(0, 1))
        runner = Runner(lambda: compiled.value_and_grad(a, y0))
        runner.compile_s = time.perf_counter() - start
        return runner
    if lib == "autograd":
        import autograd
        import autograd.numpy as anp

        vg = autograd.value_and_grad(rk4_fn(anp), argnum=(0, 1))
        return Runner(lambda: vg(a, y0))
    if lib == "torch":
        torch = _torch()
        f = rk4_fn(torch)
        ta, ty = torch.tensor(a), torch.tensor(y0)

        def run():
            ps = [m.detach().requires_grad_() for m in (ta, ty)]
            value = f(*ps)
            return value.detach(), torch.autograd.grad(value, ps)

        return Runner(run, lambda r: (r[0].item(), [g.numpy() for g in r[1]]))
    if lib in ("jax", "jax-jit"):
        jax = _jax()
        import jax.numpy as jnp

        args = (jnp.asarray(a), jnp.asarray(y0))
        return _jax_runner(jax, lib, jax.value_and_grad(rk4_fn(jnp), argnums=(0, 1)), args)
    raise KeyError(lib)


def reference(workload, *args):
    """The hand-written (value, grads) of a workload, as NumPy."""
    return {
        "chain": lambda x0, it: chain_hand(x0, it, np if np.ndim(x0) else math),
        "mlp": lambda: mlp_hand(*mlp_data()),
        "matmul": lambda n: matmul_hand(*matmul_data(n)),
        "per_example": lambda: (0.0, per_example_hand(*mlp_data())),
        "rk4": lambda n: rk4_hand(*rk4_data(n)),
    }[workload](*args)


# -- memory: what each library keeps of a recorded scalar chain --------------------------------


def hold_chain_graph(lib, iterations):
    """Run the scalar chain forward and return what keeps its graph alive."""
    x0 = 0.3
    if lib == "numpy":
        return chain_hand_forward(x0, iterations)
    if lib in ("tape", "tape-compiled"):
        import tape

        t = tape.Tape()
        y = chain_fn(np)(tape.Leaf(t, x0), iterations)
        return t, y
    if lib == "autograd":
        import autograd.numpy as anp
        from autograd.core import make_vjp

        return make_vjp(lambda x: chain_fn(anp)(x, iterations), x0)
    if lib == "torch":
        torch = _torch()
        x = torch.tensor(x0, dtype=torch.float64, requires_grad=True)
        return x, chain_fn(torch)(x, iterations)
    if lib == "jax":
        jax = _jax()
        import jax.numpy as jnp

        return jax.vjp(lambda x: chain_fn(jnp)(x, iterations), jnp.asarray(x0))
    return None
