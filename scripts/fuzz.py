"""Long fuzzing run: random programs checked against central differences (a quarter of
them to second order too) and, where forward mode exists, jvp against vjp. The programs
are those of tests/test_fuzz.py.

    python scripts/fuzz.py --programs 5000            # or --seconds 600
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests import test_fuzz  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=2000, help="programs to try")
    parser.add_argument("--seconds", type=float, default=None, help="stop after this long")
    parser.add_argument("--max-steps", type=int, default=12, help="steps per program")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    counts = {"tried": 0, "checked": 0}
    deadline = time.monotonic() + args.seconds if args.seconds else None

    batch = min(
        args.programs, 200
    )  # hypothesis runs of this many; the time limit is checked between them

    @settings(
        max_examples=batch,
        deadline=None,
        database=None,
        phases=[Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def run(data):
        program, inputs, steps, description = data.draw(test_fuzz.programs(args.max_steps))
        counts["tried"] += 1
        try:
            second = counts["tried"] % 4 == 0  # a quarter also checks second derivatives
            counts["checked"] += bool(test_fuzz.check_program(program, inputs, steps, None, second))
        except AssertionError as error:
            raise AssertionError(f"{error}\nprogram:\n" + "\n".join(description)) from None

    start = time.monotonic()
    try:
        while counts["tried"] < args.programs and (deadline is None or time.monotonic() < deadline):
            run()
    finally:
        elapsed = time.monotonic() - start
        forward = "and jvp against vjp" if test_fuzz.jvp is not None else "(jvp/vjp not available)"
        print(
            f"{counts['tried']} programs tried, {counts['checked']} checked against central "
            f"differences {forward} (a quarter also to second order), in {elapsed:.0f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
