"""Whole functions at serving sizes, kiln.jit vs numpy vs jax.jit (CPU), in the same run, plus
first-call (trace + compile) times. Every result is checked against numpy (float64) once.

    python benchmarks/python_functions.py [--threads 2] [--only mlp,attention,layer_norm]
"""

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from python_common import (first_call, fmt_time, import_jax, machine_line, measure, pin_threads,  # noqa: E402
                           private_cache)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default="mlp,attention,layer_norm")
    args = ap.parse_args()
    pin_threads(args.threads)
    private_cache()
    import numpy as np

    import kiln

    jax, jnp = import_jax()

    rng = np.random.default_rng(0)
    cases = {}

    # --- MLP block: batch 32, 1024 -> 4096 -> 1024, GELU, residual, layer_norm
    def mlp_np(x, w1, b1, w2):
        h = x @ w1 + b1
        h = 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)))
        y = x + h @ w2
        mu = y.mean(-1, keepdims=True)
        var = ((y - mu) ** 2).mean(-1, keepdims=True)
        return (y - mu) / np.sqrt(var + 1e-5)

    def mlp_kiln(x, w1, b1, w2):
        h = kiln.gelu(x @ w1 + b1, approximate=True)
        return kiln.layer_norm(x + h @ w2, eps=1e-5)

    def mlp_jax(x, w1, b1, w2):
        h = jax.nn.gelu(x @ w1 + b1, approximate=True)
        y = x + h @ w2
        mu = y.mean(-1, keepdims=True)
        var = ((y - mu) ** 2).mean(-1, keepdims=True)
        return (y - mu) * jax.lax.rsqrt(var + 1e-5)

    mlp_args = (rng.normal(size=(32, 1024)).astype(np.float32),
                rng.normal(0, 0.03, (1024, 4096)).astype(np.float32),
                rng.normal(0, 0.1, (4096,)).astype(np.float32),
                rng.normal(0, 0.015, (4096, 1024)).astype(np.float32))
    cases["mlp"] = ("MLP block 32x1024->4096->1024", mlp_np, mlp_kiln, mlp_jax, mlp_args, 4096)

    # --- causal self-attention: batch 8, 512 tokens, 8 heads of 64 (q, k, v given)
    B, T, H, D = 8, 512, 8, 64
    mask = np.tril(np.ones((T, T), bool))

    def attn_np(q, k, v):
        s = q @ k.transpose(0, 1, 3, 2) * (1 / math.sqrt(D))
        s = np.where(mask, s, -1e30)
        s = np.exp(s - s.max(-1, keepdims=True))
        return (s / s.sum(-1, keepdims=True)) @ v

    def attn_kiln(q, k, v):
        s = (q @ k.transpose(0, 1, 3, 2)) * (1 / math.sqrt(D))
        s = kiln.where(mask, s, -1e30)
        return kiln.softmax(s, axis=-1) @ v

    def attn_jax(q, k, v):
        s = q @ k.transpose(0, 1, 3, 2) * (1 / math.sqrt(D))
        s = jnp.where(mask, s, -1e30)
        return jax.nn.softmax(s, axis=-1) @ v

    attn_args = tuple(rng.normal(size=(B, H, T, D)).astype(np.float32) for _ in range(3))
    cases["attention"] = ("causal attention 8x512, 8 heads of 64", attn_np, attn_kiln, attn_jax, attn_args, T)

    # --- layer_norm of (8192, 1024)
    def ln_np(x):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5)

    def ln_kiln(x):
        return kiln.layer_norm(x, eps=1e-5)

    def ln_jax(x):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) * jax.lax.rsqrt(var + 1e-5)

    cases["layer_norm"] = ("layer_norm (8192, 1024)", ln_np, ln_kiln, ln_jax,
                           (rng.normal(size=(8192, 1024)).astype(np.float32),), 1024)

    print(f"# whole functions, float32, {args.threads} thread(s); {machine_line()}")
    info = kiln.device_info()
    print(f"# kiln device: {info['cpu_brand']}, isa {info['isa']}, {info['num_threads']} kiln threads; "
          f"features {' '.join(info['cpu_features'])}")
    rows, firsts = [], []
    for key in args.only.split(","):
        title, f_np, f_kiln, f_jax, fargs, k = cases[key]
        ref = f_np(*[a.astype(np.float64) for a in fargs])
        kf = kiln.jit(f_kiln)
        t_first_kiln, out = first_call(kf, *fargs)
        np.testing.assert_allclose(out, ref, rtol=1e-4 * math.sqrt(k), atol=1e-4 * math.sqrt(k))
        t_kiln = measure(lambda: kf(*fargs), repeats=5)
        t_np = measure(lambda: f_np(*fargs), repeats=5)
        row = [title, t_kiln, t_np, None]
        first = [title, t_first_kiln, None]
        if jax is not None:
            jf = jax.jit(f_jax)
            jargs = [jnp.asarray(a) for a in fargs]
            t_first_jax, jout = first_call(lambda *a: jf(*a).block_until_ready(), *jargs)
            np.testing.assert_allclose(np.asarray(jout), ref, rtol=1e-4 * math.sqrt(k), atol=1e-4 * math.sqrt(k))
            # jax is given device arrays (no conversion cost); kiln takes numpy and returns numpy.
            row[3] = measure(lambda: jf(*jargs).block_until_ready(), repeats=5)
            first[2] = t_first_jax
        rows.append(row)
        firsts.append(first)
        print(f"# done {title}", file=sys.stderr)

    print("\n| function | kiln | numpy | jax.jit | numpy / kiln | jax / kiln |")
    print("| --- | --- | --- | --- | --- | --- |")
    for title, tk, tn, tj in rows:
        jt = fmt_time(tj[0]) if tj else "n/a"
        jr = f"{tj[0] / tk[0]:.2f}x" if tj else "n/a"
        print(f"| {title} | {fmt_time(tk[0])} | {fmt_time(tn[0])} | {jt} | {tn[0] / tk[0]:.2f}x | {jr} |")
    print("\nfirst call (trace + compile + run, cold cache):\n")
    print("| function | kiln first call | jax.jit first call |")
    print("| --- | --- | --- |")
    for title, tk, tj in firsts:
        print(f"| {title} | {fmt_time(tk)} | {fmt_time(tj) if tj is not None else 'n/a'} |")


if __name__ == "__main__":
    main()
