"""Reductions, kiln.jit vs numpy vs jax.jit (CPU), in the same run: sums along the last axis, along
leading and middle axes (the columns kernel), over everything, and the patterns built on them
(centering, softmax over rows of 1024 and of a vocabulary of 32000, softmax over axis 0 of a long
and of a short axis, batch statistics). Each result is checked against numpy in float64, and the
float32 sum of 10^7 copies of 0.1 is printed for each library.

    python benchmarks/python_reductions.py [--threads 2] [--only rows,columns,...]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from python_common import (fmt_time, import_jax, machine_line, measure, pin_threads,  # noqa: E402
                           private_cache)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    pin_threads(args.threads)
    private_cache()
    import numpy as np

    import kiln

    jax, jnp = import_jax()

    rng = np.random.default_rng(0)

    def mat(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    def softmax0(m, x):
        e = m.exp(x - x.max(axis=0, keepdims=True))
        return e / e.sum(axis=0, keepdims=True)

    # name: (description, input, numpy fn, kiln fn, jax fn)
    cases = {
        "rows": ("x.sum(axis=1), (4096, 4096)", mat(4096, 4096), lambda x: x.sum(axis=1)),
        "columns": ("x.sum(axis=0), (4096, 4096)", mat(4096, 4096), lambda x: x.sum(axis=0)),
        "columns_small": ("x.sum(axis=0), (512, 768)", mat(512, 768), lambda x: x.sum(axis=0)),
        "middle": ("x.sum(axis=1), (32, 128, 256)", mat(32, 128, 256), lambda x: x.sum(axis=1)),
        "all": ("x.sum(), 10^7", mat(10**7), lambda x: x.sum()),
        "all_2d": ("x.max(), (4096, 4096)", mat(4096, 4096), lambda x: x.max()),
        "mse": ("((x - 0.5) ** 2).mean(), 10^7", mat(10**7), lambda x: ((x - 0.5) ** 2).mean()),
        "center": ("x - x.mean(axis=0), (512, 768)", mat(512, 768),
                   lambda x: x - x.mean(axis=0, keepdims=True)),
        "batch_stats": ("mean and var over axis 0, (8192, 256)", mat(8192, 256),
                        lambda x: (x.mean(axis=0), ((x - x.mean(axis=0, keepdims=True)) ** 2)
                                   .mean(axis=0))),
    }
    only = set(args.only.split(",")) if args.only else set(cases) | {
        "softmax_rows", "softmax_vocab", "softmax0", "softmax0_short"}
    print(machine_line())
    print(f"threads {args.threads}; median of 7 (min-max); ratio = peer time / kiln time")
    print(f"{'case':44s} {'kiln':>22s} {'numpy':>22s} {'jax':>22s}  numpy/kiln  jax/kiln")

    def span(t):
        return f"{fmt_time(t[0])} ({t[1] / t[0]:.2f}-{t[2] / t[0]:.2f})"

    def run(desc, x, f_np, f_kiln, f_jax):
        want = f_np(x.astype(np.float64))
        got = f_kiln(x)
        for w, g in zip(want if isinstance(want, tuple) else (want,),
                        got if isinstance(got, tuple) else (got,)):
            np.testing.assert_allclose(np.asarray(g), w, rtol=2e-5, atol=2e-5)
        t_k = measure(lambda: f_kiln(x))
        t_n = measure(lambda: f_np(x))
        t_j = None
        if f_jax is not None:
            xj = jnp.asarray(x)
            jax.block_until_ready(f_jax(xj))
            t_j = measure(lambda: jax.block_until_ready(f_jax(xj)))
        jr = f"{t_j[0] / t_k[0]:8.2f}x" if t_j else "       -"
        print(f"{desc:44s} {span(t_k):>22s} {span(t_n):>22s} "
              f"{span(t_j) if t_j else '-':>22s}  {t_n[0] / t_k[0]:8.2f}x  {jr}")

    for name, (desc, x, fn) in cases.items():
        if name in only:
            run(desc, x, fn, kiln.jit(fn), jax.jit(fn) if jax else None)
    # Rows of up to 8192 keep exp(x - max) on the stack; longer ones (a vocabulary) in the output.
    for name, shape in [("softmax_rows", (4096, 1024)), ("softmax_vocab", (64, 32000))]:
        if name in only:
            run(f"softmax over the last axis, {shape}", mat(*shape),
                lambda x: (lambda e: e / e.sum(axis=-1, keepdims=True))(np.exp(x - x.max(axis=-1, keepdims=True))),
                kiln.jit(lambda x: kiln.softmax(x, axis=-1)),
                jax.jit(lambda x: jax.nn.softmax(x, axis=-1)) if jax else None)
    # A reduced axis of at most 256 rows: the columns kernel keeps exp(x - max) for the root on
    # the stack; a longer one keeps it in the output.
    for name, shape in [("softmax0", (1024, 512)), ("softmax0_short", (256, 3000))]:
        if name in only:
            run(f"softmax over axis 0, {shape}", mat(*shape), lambda x: softmax0(np, x),
                kiln.jit(lambda x: kiln.softmax(x, axis=0)),
                jax.jit(lambda x: jax.nn.softmax(x, axis=0)) if jax else None)

    ones = np.full(10**7, 0.1, np.float32)
    exact = 10**7 * float(np.float32(0.1))
    line = [f"kiln {float(kiln.jit(lambda x: x.sum())(ones)) / exact - 1:+.1e}",
            f"numpy {float(ones.sum()) / exact - 1:+.1e}"]
    if jax:
        line.append(f"jax {float(jax.jit(lambda x: x.sum())(jnp.asarray(ones))) / exact - 1:+.1e}")
    print("float32 sum of 10^7 x 0.1f, relative error: " + ", ".join(line))


if __name__ == "__main__":
    main()
