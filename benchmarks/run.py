"""Side-by-side timings of tape against the hand-written NumPy gradient and its peers.

    python benchmarks/run.py            # the full run (under ten minutes on two cores)
    python benchmarks/run.py --quick    # a smoke run in about two minutes
    python benchmarks/run.py --no-jit   # skip JAX's jit (its compiles take minutes)
    python benchmarks/run.py --workloads per_example   # one workload (comma-separated)
    python benchmarks/run.py --quick --workloads rk4_2,rk4_4,rk4_10 \
        --output benchmarks/results-small-arrays.md   # the small-array loop alone

Each (library, workload) runs in a fresh process pinned to one core, so that one
library's imports, threads, allocator or garbage collector never touch another's
timings. Every gradient is checked against the hand-written one. Medians over repeats
and ratios to the hand-written gradient come from the same run; the Markdown table is
printed and written to benchmarks/results.md.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import tracemalloc

HERE = os.path.dirname(os.path.abspath(__file__))

# one thread for every library: set before NumPy, PyTorch or JAX is imported
THREADS = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
    "JAX_PLATFORMS": "cpu",
    "JAX_ENABLE_X64": "1",
}

MODULES = {
    "numpy": "numpy",
    "tape": "tape",
    "tape-compiled": "tape",
    "autograd": "autograd",
    "torch": "torch",
    "jax": "jax",
    "jax-jit": "jax",
}
TITLES = {
    "numpy": "hand-written NumPy",
    "tape": "tape",
    "tape-compiled": "tape compiled",
    "autograd": "autograd",
    "torch": "PyTorch eager",
    "jax": "JAX eager",
    "jax-jit": "JAX jit",
}
PER_EXAMPLE_LIBRARIES = ("numpy", "tape", "tape-compiled", "torch", "jax", "jax-jit")  # a vmap
LONG_SIZES = (1_000, 10_000, 100_000, 1_000_000)
LONG_LIBRARIES = ("numpy", "tape", "autograd", "torch", "jax")
MEMORY_LIBRARIES = ("numpy", "tape", "autograd", "torch", "jax")


# -- measuring (in the worker) -------------------------------------------------------------


def median_time(fn, quick, slow_budget, hand=None):
    """Median seconds per call of ``fn`` over repeats of enough calls to be timed well;
    with ``hand``, the hand-written gradient is timed in turn with each repeat, and the
    ratio of the two medians is taken over the same stretch of time (the machine may be
    shared: load that comes and goes then affects both alike)."""

    def calibrate(f):
        once = math.inf
        for _ in range(3):  # warm up, and the fastest of three calls sets the loop length
            start = time.perf_counter()
            f()
            once = min(once, time.perf_counter() - start)
            if once > 0.5:
                break
        return once, max(1, int((0.03 if quick else 0.08) / max(once, 1e-9)))

    once, inner = calibrate(fn)
    hand_inner = calibrate(hand)[1] if hand is not None else 0
    settle()
    repeats = 5 if quick else 11
    if once * inner * repeats > slow_budget:
        repeats = max(1, min(repeats, int(slow_budget / max(once * inner, 1e-9))))
    samples, hand_samples = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - start) / inner)
        if hand is not None:
            start = time.perf_counter()
            for _ in range(hand_inner):
                hand()
            hand_samples.append((time.perf_counter() - start) / hand_inner)
    t = statistics.median(samples)
    ratio = t / statistics.median(hand_samples) if hand_samples else None
    return t, ratio, len(samples) * inner


def settle():
    """Move every object alive now out of the garbage collector's sight: the objects that
    imports made (hundreds of thousands with PyTorch or JAX) would otherwise make each
    full collection, of whatever library is timed in this process, cost more."""
    gc.collect()
    gc.freeze()


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def worker(lib, workload, quick):
    import numpy as np
    import workloads as w

    out = {"lib": lib, "workload": workload}
    budget = 6.0 if quick else 20.0
    if workload in ("chain", "vchain"):
        iterations = w.CHAIN_ITERATIONS
        x0 = 0.3 if workload == "chain" else np.linspace(-1.0, 1.0, 10)
        runner = w.make_chain(lib, x0, iterations)
        hand = None if lib == w.HAND else w.make_chain(w.HAND, x0, iterations)
        t, out["ratio"], out["calls"] = median_time(runner, quick, budget, hand)
        out.update(seconds=t, per_op=t / (iterations * w.OPS_PER_ITERATION))
        ref = w.reference("chain", x0, iterations)
    elif workload == "mlp":
        runner = w.make_mlp(lib)
        hand = None if lib == w.HAND else w.make_mlp(w.HAND)
        out["seconds"], out["ratio"], out["calls"] = median_time(runner, quick, budget, hand)
        ref = w.reference("mlp")
    elif workload == "matmul":
        n = 400 if quick else 1000
        runner = w.make_matmul(lib, n)
        hand = None if lib == w.HAND else w.make_matmul(w.HAND, n)
        out["seconds"], out["ratio"], out["calls"] = median_time(runner, quick, budget, hand)
        out["n"] = n
        ref = w.reference("matmul", n)
    elif workload == "per_example":
        runner = w.make_per_example(lib)
        hand = None if lib == w.HAND else w.make_per_example(w.HAND)
        out["seconds"], out["ratio"], out["calls"] = median_time(runner, quick, budget, hand)
        if lib in ("tape", "tape-compiled"):  # and tape's loop of grad calls, for the speedup
            out["loop_seconds"] = median_time(w.make_per_example("tape-loop"), quick, budget)[0]
        ref = w.reference("per_example")
    elif workload.startswith("rk4_"):
        n = int(workload.removeprefix("rk4_"))
        runner = w.make_rk4(lib, n)
        hand = None if lib == w.HAND else w.make_rk4(w.HAND, n)
        out["seconds"], out["ratio"], out["calls"] = median_time(runner, quick, budget, hand)
        out["per_step"] = out["seconds"] / w.RK4_STEPS
        ref = w.reference("rk4", n)
    elif workload == "memory":
        return memory_worker(lib, quick, out)
    elif workload == "long":
        return long_worker(lib, quick, out)
    elif workload == "peak":
        return peak_worker(lib, quick, out)
    else:
        raise KeyError(workload)
    out["error"] = w.relative_error(runner.result(), ref)
    out["compile_s"] = runner.compile_s
    return out


def memory_worker(lib, quick, out):
    import workloads as w

    iterations = 1000 if quick else 5000
    ops = iterations * w.OPS_PER_ITERATION
    w.hold_chain_graph(lib, 50)  # imports and first-call caches, outside the measurement
    gc.collect()
    before = rss_bytes()
    held = w.hold_chain_graph(lib, iterations)
    gc.collect()
    out["rss_per_op"] = (rss_bytes() - before) / ops
    del held
    gc.collect()
    tracemalloc.start()  # apart: its own bookkeeping would count in the RSS
    held = w.hold_chain_graph(lib, iterations)
    out["traced_per_op"] = tracemalloc.get_traced_memory()[0] / ops
    tracemalloc.stop()
    del held
    return out


def long_worker(lib, quick, out):
    import numpy as np
    import workloads as w

    sizes = LONG_SIZES[:3] if quick else LONG_SIZES
    # seconds one size may take, larger sizes are skipped: tape's own 1e6 always runs
    budget = (4.0 if quick else 25.0) * (6 if lib == "tape" else 1)
    results = {}
    per_op = None
    for n in sizes:
        iterations = max(1, n // w.OPS_PER_ITERATION)
        if per_op is not None and per_op * n * 2 > budget:
            results[n] = None
            continue
        runner = w.make_chain(lib, 0.3, iterations)
        settle()
        samples = []
        # short runs are many, so that one hiccup of a shared machine cannot set the median
        for _ in range(15 if n <= 10_000 else 3 if n <= 100_000 else 1):
            start = time.perf_counter()
            runner()
            samples.append(time.perf_counter() - start)
        per_op = statistics.median(samples) / (iterations * w.OPS_PER_ITERATION)
        value, grad = runner.result()
        ref_value, ref_grad = w.chain_hand(0.3, iterations)
        if not np.isclose(float(np.ravel(grad)[0] if np.ndim(grad) else grad), ref_grad, rtol=1e-6):
            out["error"] = math.inf
        results[n] = per_op
    out["per_op"] = results
    return out


def peak_worker(lib, quick, out):
    """Peak memory (tracemalloc) of value and gradient against the forward pass alone."""
    import numpy as np
    import workloads as w

    def peak(fn):
        gc.collect()
        tracemalloc.start()
        kept = fn()
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        del kept
        return top

    n = 400 if quick else 1000
    params, x, y = w.mlp_data()
    a, b, c = w.matmul_data(n)
    cases = {}
    if lib == "numpy":
        loss = w.mlp_fn(np, lambda z: np.max(z, axis=1, keepdims=True))
        cases["mlp"] = (lambda: loss(params, x, y), lambda: w.mlp_hand(params, x, y))
        mm = w.matmul_fn(np)
        cases["matmul"] = (lambda: mm(a, b, c), lambda: w.matmul_hand(a, b, c))
        cases["chain"] = (
            lambda: w.chain_fn(np)(0.3),
            lambda: w.chain_hand(0.3, w.CHAIN_ITERATIONS),
        )
    else:
        import tape

        def recorded(f, *args):
            t = tape.Tape()
            return t, f(*[tape.Leaf(t, a) for a in args])

        def mlp_flat(w1, b1, w2, b2):
            return loss([w1, b1, w2, b2], x, y)

        loss = w.mlp_fn(np, lambda z: np.max(z, axis=1, keepdims=True))
        mm = w.matmul_fn(np)
        chain = w.chain_fn(np)
        cases["mlp"] = (
            lambda: recorded(mlp_flat, *params),
            lambda: tape.value_and_grad(mlp_flat)(*params),
        )
        cases["matmul"] = (lambda: recorded(mm, a, b, c), lambda: tape.value_and_grad(mm)(a, b, c))
        cases["chain"] = (lambda: recorded(chain, 0.3), lambda: tape.value_and_grad(chain)(0.3))
    out["peak"] = {k: (peak(fwd), peak(vg)) for k, (fwd, vg) in cases.items()}
    out["n"] = n
    return out


# -- orchestration (in the parent) ----------------------------------------------------------


def installed(lib):
    return importlib.util.find_spec(MODULES[lib]) is not None


def one_core():
    """Run the calling process on one core: thread settings alone do not hold every
    library to one (JAX's CPU client keeps a pool that used 1.65 cores of two on the
    1000² workload), and the affinity, inherited by every thread, does."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def spawn(lib, workload, args, timeout):
    env = dict(os.environ, **THREADS)
    env["PYTHONPATH"] = HERE + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", lib, workload]
    if args.quick:
        cmd.append("--quick")
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, env=env, capture_output=True, text=True, timeout=timeout, preexec_fn=one_core
        )
    except subprocess.TimeoutExpired:
        return {"lib": lib, "workload": workload, "timeout": timeout}
    wall = time.perf_counter() - start
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"lib": lib, "workload": workload, "failed": tail[0][:200]}
    result = json.loads(lines[-1])
    result["wall"] = wall
    return result


def fmt_time(seconds):
    if seconds is None:
        return "–"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if seconds >= scale:
            value = seconds / scale
            return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"
    return f"{seconds * 1e9:.2g} ns"


def fmt_bytes(n):
    if n is None:
        return "–"
    return f"{n:.0f} B" if abs(n) < 10_000 else f"{n / 1024:.0f} KiB"


def cell(result, key, hand, fmt=fmt_time, extra=None, ratio=True):
    if result is None:
        return "not installed"
    if "timeout" in result:
        return f"> {result['timeout']:.0f} s (stopped)"
    if "failed" in result:
        return "failed: " + result["failed"].replace("|", "/")[:60]
    value = result.get(key)
    text = fmt(value)
    if ratio:
        ratio = result.get("ratio") or (value / hand if hand and value is not None else None)
    if ratio and result["lib"] != "numpy":
        text += f" ({ratio:.2f}×)"
    if result.get("error", 0) > 1e-6:
        text += f" **grad off by {result['error']:.1e}**"
    if extra:
        text += extra(result)
    return text


def compile_note(result):
    c = result.get("compile_s")
    return f" + {c:.2g} s compile" if c is not None else ""


def per_example_note(result):
    """tape's speedup over its own Python loop of one ``grad`` call per example."""
    loop, t = result.get("loop_seconds"), result.get("seconds")
    note = f", {loop / t:.1f}× faster than a loop of grad" if loop and t else ""
    return note + compile_note(result)


def table(results, libs, args):
    def get(lib, workload):
        return results.get((lib, workload))

    header = "| workload | " + " | ".join(TITLES[lib] for lib in libs) + " |"
    rule = "| --- |" + " --- |" * len(libs)
    lines = [header, rule]

    def row(title, workload, key, fmt=fmt_time, extra=None, ratio=True):
        if workload not in args.chosen:  # a run of some workloads shows only theirs
            return
        hand_result = get("numpy", workload)
        hand = hand_result.get(key) if ratio and hand_result and key in hand_result else None
        cells = [
            "–"  # no vmap to time
            if workload == "per_example" and lib not in PER_EXAMPLE_LIBRARIES
            else cell(get(lib, workload), key, hand, fmt, extra, ratio)
            if (lib, workload) in results or not args.skipped(lib, workload)
            else "skipped"
            for lib in libs
        ]
        lines.append(f"| {title} | " + " | ".join(cells) + " |")

    n = 400 if args.quick else 1000
    row("scalar chain, 12,000 ops: time per op", "chain", "per_op", extra=compile_note)
    row("same chain on length-10 vectors: time per op", "vchain", "per_op", extra=compile_note)
    row("MLP value and gradient (batch 64, 64-128-10)", "mlp", "seconds", extra=compile_note)
    row(f"`sum(tanh(A @ B) @ C)`, {n}×{n}", "matmul", "seconds", extra=compile_note)
    row(
        "per-example gradients of the MLP, `vmap(grad)` (batch 64; hand-written: `einsum`)",
        "per_example",
        "seconds",
        extra=per_example_note,
    )
    from workloads import RK4_SIZES, RK4_STEPS  # beside this script: NumPy alone

    for size in RK4_SIZES:
        row(
            f"RK4 loop, {size}×{size} `A`: one step of dy/dt = tanh(A @ y) (value and gradient "
            f"of {RK4_STEPS} steps)",
            f"rk4_{size}",
            "per_step",
            extra=compile_note,
        )
    row("memory per recorded scalar op (RSS)", "memory", "rss_per_op", fmt_bytes, ratio=False)
    row(
        "memory per recorded scalar op (tracemalloc)",
        "memory",
        "traced_per_op",
        fmt_bytes,
        ratio=False,
    )
    for size in (LONG_SIZES[:3] if args.quick else LONG_SIZES) if "long" in args.chosen else ():
        lines.append(
            f"| long tape, {size:,} records: time per op | "
            + " | ".join(_long_cell(get(lib, "long"), size, lib, args) for lib in libs)
            + " |"
        )
    return "\n".join(lines)


def _long_cell(result, size, lib, args):
    if lib not in LONG_LIBRARIES:
        return "–"
    if result is None:
        return "skipped" if args.skipped(lib, "long") else "not installed"
    if "per_op" not in result:
        return cell(result, "per_op", None)
    per_op = result["per_op"].get(str(size))
    if per_op is None:
        return "skipped (too slow)"
    first = result["per_op"].get(str(LONG_SIZES[0]))
    text = fmt_time(per_op)
    if size != LONG_SIZES[0] and first:
        text += f" ({per_op / first:.2f}× of 1e3)"
    if result.get("error"):
        text += " **grad off**"
    return text


def peak_table(results, args):
    lines = [
        "| workload | forward pass (recorded) | value and gradient | ratio |",
        "| --- | --- | --- | --- |",
    ]
    for lib in ("numpy", "tape"):
        result = results.get((lib, "peak"))
        if not result or "peak" not in result:
            continue
        for name, (fwd, vg) in result["peak"].items():
            title = {
                "mlp": "MLP",
                "matmul": f"`sum(tanh(A @ B) @ C)`, {result['n']}²",
                "chain": "scalar chain",
            }[name]
            ratio = vg / max(fwd, 1)
            lines.append(
                f"| {TITLES[lib]}: {title} | {fmt_bytes(fwd)} | {fmt_bytes(vg)} | {ratio:.2f}× |"
            )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes and fewer repeats")
    parser.add_argument("--no-jit", action="store_true", help="skip JAX jit")
    parser.add_argument(
        "--jit-timeout",
        type=float,
        default=90.0,
        help="seconds a JAX jit workload (compile included) may take (default 90)",
    )
    parser.add_argument("--only", default="", help="comma-separated libraries to run")
    parser.add_argument("--workloads", default="", help="comma-separated workloads to run")
    parser.add_argument("--output", default=os.path.join(HERE, "results.md"))
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        sys.setrecursionlimit(100_000)  # autograd's and JAX's reverse passes recurse on long tapes
        print(json.dumps(worker(*args.worker, args.quick)))
        return

    libs = [lib for lib in TITLES if not args.only or lib in args.only.split(",")]
    if args.no_jit and "jax-jit" in libs:
        libs.remove("jax-jit")
    present = [lib for lib in libs if installed(lib)]
    workloads_all = ["chain", "vchain", "mlp", "matmul", "per_example", "memory", "long", "peak"]
    from workloads import RK4_SIZES

    workloads_all[5:5] = [f"rk4_{n}" for n in RK4_SIZES]
    chosen = [wl for wl in workloads_all if not args.workloads or wl in args.workloads.split(",")]

    def skipped(lib, workload):
        return (
            workload not in chosen
            or (workload == "memory" and lib not in MEMORY_LIBRARIES)
            or (workload == "long" and lib not in LONG_LIBRARIES)
            or (workload == "peak" and lib not in ("numpy", "tape"))
            or (workload == "per_example" and lib not in PER_EXAMPLE_LIBRARIES)
        )

    args.skipped = skipped
    args.chosen = chosen
    started = time.perf_counter()
    results = {}
    for workload in chosen:
        for lib in present:
            if skipped(lib, workload):
                continue
            timeout = args.jit_timeout if lib == "jax-jit" else 300.0
            result = spawn(lib, workload, args, timeout)
            results[(lib, workload)] = result
            print(f"  {workload:8s} {lib:14s} {_summary(result)}", file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - started

    versions = _versions(present)
    shown = [a for a in sys.argv[1:] if not a.startswith("--output")]
    if "--output" in sys.argv[1:]:
        shown.remove(sys.argv[sys.argv.index("--output") + 1])
    command = " ".join(["python benchmarks/run.py", *shown])
    text = "\n".join(
        [
            f"Command: `{command}` ({elapsed / 60:.1f} min). One core per library (process "
            "affinity and thread settings), float64, "
            f"medians over repeats; (n×) is the ratio to the hand-written NumPy gradient in the "
            f"same run. Every gradient is checked against the hand-written one.",
            "",
            f"Machine: {platform.processor() or platform.machine()}, "
            f"Python {platform.python_version()}; "
            + ", ".join(f"{k} {v}" for k, v in versions.items()),
            "",
            table(results, libs, args),
            "",
        ]
    )
    if "peak" in chosen:
        text += "\n".join(
            [
                "Peak memory of value and gradient against the forward pass alone (tracemalloc):",
                "",
                peak_table(results, args),
                "",
            ]
        )
    print(text)
    with open(args.output, "w") as f:
        f.write(text)


def _summary(result):
    if "timeout" in result:
        return f"stopped after {result['timeout']:.0f} s"
    if "failed" in result:
        return "failed: " + result["failed"]
    keys = ("per_op", "seconds", "rss_per_op", "compile_s", "error", "wall")
    return ", ".join(f"{k}={result[k]:.3g}" for k in keys if isinstance(result.get(k), float))


def _versions(libs):
    out = {}
    for lib in libs:
        module = MODULES[lib]
        if module in out:
            continue
        try:
            out[module] = __import__(module).__version__
        except Exception:
            pass
    return out


if __name__ == "__main__":
    main()
