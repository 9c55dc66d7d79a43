"""Dispatch overhead: f(x) = x + 1 on an 8-element float32 array, per call on a cache hit, for
kiln.jit, numba.njit and jax.jit (CPU) in the same run.

    python benchmarks/python_dispatch.py [--threads 1]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from python_common import fmt_time, machine_line, measure, pin_threads  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    pin_threads(args.threads)
    import numpy as np

    import kiln

    x = np.arange(8, dtype=np.float32)
    want = x + 1
    rows = []

    f = kiln.jit(lambda x: x + 1)
    np.testing.assert_array_equal(f(x), want)
    rows.append(("kiln.jit", measure(lambda: f(x))))

    try:
        import numba

        g = numba.njit(lambda x: x + 1)
        np.testing.assert_array_equal(g(x), want)
        rows.append(("numba.njit", measure(lambda: g(x))))
    except ImportError:
        print("numba not installed (benchmarks/setup-python)")
    try:
        import jax

        jax.config.update("jax_platforms", "cpu")
        h = jax.jit(lambda x: x + 1)
        np.testing.assert_array_equal(np.asarray(h(x)), want)
        rows.append(("jax.jit (returns a jax.Array)", measure(lambda: h(x))))
        rows.append(("jax.jit + np.asarray", measure(lambda: np.asarray(h(x)))))
    except ImportError:
        print("jax not installed (benchmarks/setup-python)")
    rows.append(("numpy x + 1 (no JIT)", measure(lambda: x + 1)))

    kiln_t = rows[0][1][0]
    print(f"# dispatch overhead, f(x) = x + 1, x float32[8], {args.threads} thread(s)")
    print(f"# {machine_line()}")
    print("| function | per call (median) | spread (min-max) | peer / kiln |")
    print("| --- | --- | --- | --- |")
    for name, (med, lo, hi) in rows:
        print(f"| {name} | {fmt_time(med)} | {fmt_time(lo)} - {fmt_time(hi)} | {med / kiln_t:.2f}x |")


if __name__ == "__main__":
    main()
