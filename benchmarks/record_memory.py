"""What a record keeps: bytes per recorded op, by the kind of call, and at the peak of a
value and gradient of a long tape.

    python benchmarks/record_memory.py            # 10^6 records at the peak (a few seconds)
    python benchmarks/record_memory.py --records 100000

Printed: ``tracemalloc``'s bytes per record for a call of one node (``np.sin(x)``), of a
node and a number (``x + 1.0``), of two nodes (``x * y``), and per op of the scalar chain
(``x + 0.01 * log(exp(sin(x)) + 1)``); then how much the process grows (peak RSS) per op
while ``value_and_grad`` of the scalar chain runs on a tape of ``--records`` records, the
reverse pass's adjoints included. Each figure in a fresh process, so that one does not
reuse the memory another freed.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import tracemalloc

HERE = os.path.dirname(os.path.abspath(__file__))


def per_record(kind: str, n: int = 30_000) -> float:
    import numpy as np

    import tape

    step = {
        "np.sin(x)": np.sin,
        "x + 1.0": lambda x: x + 1.0,
        "x * y": lambda x: x * x,
        "scalar chain, per op": lambda x: x + 0.01 * np.log(np.exp(np.sin(x)) + 1),
    }[kind]
    ops = 6 if kind.startswith("scalar chain") else 1
    t = tape.Tape()
    x = tape.Leaf(t, 0.3)
    for _ in range(300):  # positions past Python's cached small ints
        x = step(x)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    with np.errstate(all="ignore"):  # (sin's chain does not overflow; the others may)
        for _ in range(n // ops):
            x = step(x)
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return used / (n // ops * ops)


def peak_per_op(records: int) -> float:
    import numpy as np

    import tape

    sys.path.insert(0, HERE)
    import workloads as w

    chain = w.chain_fn(np)
    iterations = records // w.OPS_PER_ITERATION
    tape.value_and_grad(lambda x: chain(x, 10))(0.3)  # imports and first-call caches
    gc.collect()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tape.value_and_grad(lambda x: chain(x, iterations))(0.3)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    return grown * 1024 / (iterations * w.OPS_PER_ITERATION)  # ru_maxrss: KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        what, n = args.worker
        figure = peak_per_op(int(n)) if what == "peak" else per_record(what)
        print(json.dumps(figure))
        return
    path = os.path.dirname(HERE) + os.pathsep + os.environ.get("PYTHONPATH", "")
    env = dict(os.environ, PYTHONPATH=path)  # this checkout's tape

    def run(what: str, n: int = 0) -> float:
        out = subprocess.run(
            [sys.executable, __file__, "--worker", what, str(n)],
            capture_output=True, text=True, check=True, env=env,
        )  # fmt: skip
        return json.loads(out.stdout.strip().splitlines()[-1])

    for kind in ("np.sin(x)", "x + 1.0", "x * y", "scalar chain, per op"):
        print(f"{kind:22s} {run(kind):6.0f} bytes per record (tracemalloc)")
    print(
        f"value and gradient of the scalar chain, {args.records:,} records: the process grows "
        f"by {run('peak', args.records):.0f} bytes per op at its peak (RSS)"
    )


if __name__ == "__main__":
    main()
