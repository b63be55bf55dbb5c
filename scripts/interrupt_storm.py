"""Interrupt grad, jvp, compile_grad replays and vmap at random points,
thousands of times, checking after each that nothing was left behind.

    python scripts/interrupt_storm.py --count 12000
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.interrupt_storm import storm  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=12000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    start = time.perf_counter()
    interrupted = storm(args.count, args.seed)
    took = time.perf_counter() - start
    print(f"{args.count} calls, {sum(interrupted.values())} interrupted, in {took:.0f} s")
    for name, n in interrupted.items():
        print(f"  {name}: {n} interrupted")
    print("nothing left behind after any of them")


if __name__ == "__main__":
    main()
