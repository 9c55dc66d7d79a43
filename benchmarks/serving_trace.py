"""Issue 6, a serving trace: `--calls` calls (default 1000) of a transformer MLP block whose token
count T is drawn uniformly from 1..max_tokens (fixed seed):

    y = x + gelu(layer_norm(x, w_ln, b_ln) @ w1 + b1) @ w2 + b2     x: float32 [T, 256], hidden 1024

kiln is run three ways in one process:
  - dynamic: @kiln.jit(dynamic="auto") over the trace, cold (a fresh private KILN_CACHE_DIR), each
    call timed and classified by stats(): a call during which "compiles" grew is a compile call;
  - oracle: @kiln.jit(dynamic=False) with every distinct T of the trace precompiled (untimed), then
    the same trace (all hits);
  - steady state: after the cold pass, the full trace through dynamic and oracle alternately,
    `--reps` times (paired passes; the order alternates between repetitions).
and jax.jit (CPU), fresh, over the same trace including its compiles (it specializes every shape).

Goals: <= 4 compiles; dynamic within 1.15x of the oracle (excluding dynamic's compile calls, from
both sums); end to end (compiles included) >= 10x faster than jax.jit. Every engine's result is
checked against a float64 numpy reference on a few calls; a wrong result exits non-zero.

    python3 benchmarks/serving_trace.py [--threads 2] [--calls 1000] [--seed 0] [--reps 5]
        [--weights args|captured] [--max-tokens 512] [--no-jax]
    python3 benchmarks/serving_trace.py --calls 40 --max-tokens 64 --reps 1   # quick sanity run
"""

import argparse
import collections
import gc
import math
import os
import re
import shlex
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from python_common import fmt_time, machine_line, pin_threads  # noqa: E402

D_MODEL, D_HIDDEN = 256, 1024
EPS = 1e-5
RTOL = ATOL = 2e-4  # float32 against float64, K = 1024


class Pass:
    """One pass of the trace through one engine: per-call seconds and what stats() said."""

    def __init__(self, n):
        import numpy as np

        self.times = np.zeros(n)
        self.compiled = np.zeros(n, bool)  # stats()["compiles"] grew during the call
        self.disk_loaded = np.zeros(n, bool)  # stats()["disk_hits"] grew (kernels loaded, not compiled)
        self.new_compiles = 0
        self.saved = {}  # call index -> copy of the output (for the reference check)
        self.stats_before = None
        self.stats_after = None

    def total(self, mask=None):
        return float(self.times.sum() if mask is None else self.times[mask].sum())


def run_kiln_pass(f, xs, extra, save=()):
    """Calls f(x, *extra) for every x in xs, timing only the call; stats() is read between calls."""
    p = Pass(len(xs))
    stats = f.stats
    gc.collect()
    gc.disable()
    try:
        s = stats()
        p.stats_before = s
        compiles, disk = s["compiles"], s.get("disk_hits", 0)
        for i, x in enumerate(xs):
            t0 = time.perf_counter()
            out = f(x, *extra)
            t1 = time.perf_counter()
            p.times[i] = t1 - t0
            s = stats()
            if s["compiles"] > compiles:
                p.compiled[i] = True
                p.new_compiles += s["compiles"] - compiles
                compiles = s["compiles"]
            if s.get("disk_hits", 0) > disk:
                p.disk_loaded[i] = True
                disk = s.get("disk_hits", 0)
            if i in save:
                p.saved[i] = _copy(out)
        p.stats_after = s
    finally:
        gc.enable()
    return p


def run_jax_pass(jf, xs, extra, save=()):
    p = Pass(len(xs))
    gc.collect()
    gc.disable()
    try:
        for i, x in enumerate(xs):
            t0 = time.perf_counter()
            out = jf(x, *extra).block_until_ready()
            t1 = time.perf_counter()
            p.times[i] = t1 - t0
            if i in save:
                p.saved[i] = _copy(out)
    finally:
        gc.enable()
    return p


def _copy(out):
    import numpy as np

    return np.array(out, copy=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reps", type=int, default=5, help="paired steady-state passes (dynamic vs oracle)")
    ap.add_argument("--weights", choices=("args", "captured"), default="args",
                    help="weights as function arguments, or captured from the enclosing scope (constants)")
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--no-jax", action="store_true")
    args = ap.parse_args()
    if args.calls < 1 or args.max_tokens < 1 or args.reps < 0 or args.threads < 1:
        ap.error("--calls, --max-tokens and --threads must be >= 1, --reps >= 0")
    command = "python3 " + " ".join(shlex.quote(a) for a in sys.argv)

    pin_threads(args.threads)
    # A fresh private kiln cache (always, whatever KILN_CACHE_DIR says), so compiles are real.
    cache_dir = tempfile.mkdtemp(prefix="kiln-serving-")
    os.environ["KILN_CACHE_DIR"] = cache_dir
    import numpy as np

    try:
        import kiln
    except ImportError as e:
        print(f"kiln is not importable ({type(e).__name__}: {e}); install it with benchmarks/setup-python",
              file=sys.stderr)
        return 2

    jax = jnp = None
    jax_note = "skipped: --no-jax"
    if not args.no_jax:
        try:
            import jax
            import jax.numpy as jnp

            jax.config.update("jax_platforms", "cpu")
        except ImportError:
            jax = None
            jax_note = "jax not installed: benchmarks/setup-python installs it"
            print(f"# {jax_note}; skipping jax.jit")

    try:
        from scipy.special import erf as _erf  # float64, exact to rounding
        erf_name = "scipy.special.erf"
    except ImportError:
        _erf = np.vectorize(math.erf, otypes=[np.float64])
        erf_name = "math.erf (vectorized)"

    # --- the trace and the weights
    rng = np.random.default_rng(args.seed)
    tokens = rng.integers(1, args.max_tokens + 1, size=args.calls)
    # Inputs are row windows (contiguous, 64-byte aligned views) of one pool, at random offsets.
    pool = rng.standard_normal((2 * args.max_tokens, D_MODEL), dtype=np.float32)
    offsets = [int(rng.integers(0, 2 * args.max_tokens - t + 1)) for t in tokens]
    xs = [pool[o:o + int(t)] for o, t in zip(offsets, tokens)]
    wrng = np.random.default_rng([args.seed, 1])
    w_ln = (1 + 0.1 * wrng.standard_normal(D_MODEL)).astype(np.float32)
    b_ln = (0.1 * wrng.standard_normal(D_MODEL)).astype(np.float32)
    w1 = (wrng.standard_normal((D_MODEL, D_HIDDEN)) / math.sqrt(D_MODEL)).astype(np.float32)
    b1 = (0.1 * wrng.standard_normal(D_HIDDEN)).astype(np.float32)
    w2 = (wrng.standard_normal((D_HIDDEN, D_MODEL)) / math.sqrt(D_HIDDEN)).astype(np.float32)
    b2 = (0.1 * wrng.standard_normal(D_MODEL)).astype(np.float32)
    weights = (w_ln, b_ln, w1, b1, w2, b2)

    distinct = sorted(set(int(t) for t in tokens))
    first_of = {}
    for i, t in enumerate(tokens):
        first_of.setdefault(int(t), i)
    # Calls checked against the reference: the first 3, 3 random ones, the smallest and largest T.
    crng = np.random.default_rng([args.seed, 2])
    check = set(range(min(3, args.calls)))
    rest = [i for i in range(args.calls) if i not in check]
    check |= set(int(i) for i in crng.choice(rest, size=min(3, len(rest)), replace=False)) if rest else set()
    check |= {int(np.argmin(tokens)), int(np.argmax(tokens))}
    check = sorted(check)

    # --- the block, for each engine
    def block_ref(x, w_ln, b_ln, w1, b1, w2, b2):
        x, w_ln, b_ln, w1, b1, w2, b2 = (a.astype(np.float64) for a in (x, w_ln, b_ln, w1, b1, w2, b2))
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        h = ((x - mu) / np.sqrt(var + EPS) * w_ln + b_ln) @ w1 + b1
        h = 0.5 * h * (1 + _erf(h / math.sqrt(2)))
        return x + h @ w2 + b2

    if args.weights == "args":
        def block_kiln(x, w_ln, b_ln, w1, b1, w2, b2):
            h = kiln.layer_norm(x, w_ln, b_ln, eps=EPS) @ w1 + b1
            return x + kiln.gelu(h, approximate=False) @ w2 + b2
        kiln_extra = weights
    else:
        def block_kiln(x):  # the weights are numpy arrays of the enclosing scope: trace constants
            h = kiln.layer_norm(x, w_ln, b_ln, eps=EPS) @ w1 + b1
            return x + kiln.gelu(h, approximate=False) @ w2 + b2
        kiln_extra = ()

    if jax is not None:
        def _jax_body(x, w_ln, b_ln, w1, b1, w2, b2):
            mu = x.mean(-1, keepdims=True)
            var = ((x - mu) ** 2).mean(-1, keepdims=True)
            h = ((x - mu) * jax.lax.rsqrt(var + EPS) * w_ln + b_ln) @ w1 + b1
            return x + jax.nn.gelu(h, approximate=False) @ w2 + b2

        jweights = tuple(jnp.asarray(w) for w in weights)  # on the device once, like kiln's numpy weights
        if args.weights == "args":
            block_jax = _jax_body
            jax_extra = jweights
        else:
            def block_jax(x):  # captured device arrays: constants of jax's trace
                return _jax_body(x, *jweights)
            jax_extra = ()

    # --- header
    info = kiln.device_info()
    print(f"# serving trace (issue 6): {args.calls} calls of y = x + gelu(layer_norm(x) @ w1 + b1) @ w2 + b2, "
          f"x float32 [T, {D_MODEL}], hidden {D_HIDDEN}, T ~ U{{1..{args.max_tokens}}}, seed {args.seed}, "
          f"weights {args.weights}")
    print(f"# {args.threads} thread(s); {machine_line()}")
    print(f"# kiln device: {info.get('cpu_brand')}, isa {info.get('isa')}, {info.get('num_threads')} kiln threads; "
          f"features {' '.join(info.get('cpu_features', []))}")
    print(f"# kiln cache (fresh, private): {cache_dir}")
    print(f"# trace: {len(distinct)} distinct T, mean T {tokens.mean():.1f}, {int(tokens.sum())} tokens; "
          f"first T: {' '.join(str(int(t)) for t in tokens[:12])}{' ...' if args.calls > 12 else ''}")
    print(f"# reference: float64 numpy, exact GELU by {erf_name}; checked calls {check}; "
          f"rtol {RTOL:g} atol {ATOL:g}")
    sys.stdout.flush()

    refs = {}
    failures = []

    def verify(engine, p):
        for i in check:
            if i not in p.saved:
                continue
            if i not in refs:
                refs[i] = block_ref(xs[i], *weights)
            out, ref = p.saved[i], refs[i]
            where = f"{engine}, call {i} (T={int(tokens[i])})"
            if out.shape != ref.shape or out.dtype != np.float32:
                failures.append(f"{where}: got {out.dtype} {out.shape}, expected float32 {ref.shape}")
                continue
            try:
                np.testing.assert_allclose(out, ref, rtol=RTOL, atol=ATOL)
            except AssertionError as e:
                failures.append(f"{where}: {str(e).strip()}")
        print(f"# checked {engine} on {len([i for i in check if i in p.saved])} calls: "
              f"{'FAILED' if any(f.startswith(engine + ',') for f in failures) else 'ok'}", file=sys.stderr)

    def progress(msg):
        print(f"# [{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr)
        sys.stderr.flush()

    # --- kiln dynamic="auto", cold
    progress("kiln dynamic='auto', cold pass")
    dyn = kiln.jit(block_kiln, dynamic="auto")
    d1 = run_kiln_pass(dyn, xs, kiln_extra, save=check)
    verify("kiln dynamic", d1)
    dstats = d1.stats_after
    progress(f"  {d1.new_compiles} compiles, {fmt_time(d1.total())}")

    # --- kiln oracle: every distinct T precompiled
    progress(f"kiln oracle (dynamic=False): precompiling {len(distinct)} shapes")
    limit = len(distinct) + 8
    try:
        orc = kiln.jit(block_kiln, dynamic=False, max_variants=limit)
        orc_note = f"max_variants={limit}"
    except TypeError:  # a kiln without the (undocumented) max_variants keyword
        orc = kiln.jit(block_kiln, dynamic=False)
        orc_note = "default max_variants"
    t0 = time.perf_counter()
    for t in distinct:
        orc(xs[first_of[t]], *kiln_extra)
    orc_precompile = time.perf_counter() - t0
    s = orc.stats()
    orc_pre_stats = dict(compiles=s["compiles"], disk_hits=s.get("disk_hits", 0), variants=s.get("variants"),
                         variant_limit_hits=s.get("variant_limit_hits"))
    progress(f"  precompiled in {fmt_time(orc_precompile)}: {orc_pre_stats}; timed pass")
    o1 = run_kiln_pass(orc, xs, kiln_extra, save=check)
    verify("kiln oracle", o1)

    # --- paired steady-state repetitions
    reps = []  # (ratio, dyn seconds, oracle seconds, calls compared, dyn compiles, oracle compiles)
    last_dyn = None
    for r in range(args.reps):
        progress(f"steady state, paired repetition {r + 1}/{args.reps}")
        save = check if r == args.reps - 1 else ()
        if r % 2 == 0:
            dp = run_kiln_pass(dyn, xs, kiln_extra, save=save)
            op = run_kiln_pass(orc, xs, kiln_extra)
        else:
            op = run_kiln_pass(orc, xs, kiln_extra)
            dp = run_kiln_pass(dyn, xs, kiln_extra, save=save)
        mask = ~(dp.compiled | op.compiled)
        reps.append((dp.total(mask) / op.total(mask), dp.total(mask), op.total(mask), int(mask.sum()),
                     dp.new_compiles, op.new_compiles))
        last_dyn = dp
    if last_dyn is not None:
        verify("kiln dynamic (steady)", last_dyn)

    # --- jax.jit, fresh, end to end
    j1 = jhot = None
    jax_compiles = None
    if jax is not None:
        progress("jax.jit, fresh, end to end (compiles per shape)")
        jf = jax.jit(block_jax)
        j1 = run_jax_pass(jf, xs, jax_extra, save=check)
        verify("jax.jit", j1)
        size = getattr(jf, "_cache_size", None)
        jax_compiles = size() if callable(size) else None
        progress(f"  {fmt_time(j1.total())}; hot pass (every shape compiled)")
        jhot = run_jax_pass(jf, xs, jax_extra)

    # --- report
    n = args.calls
    mask1 = ~(d1.compiled | o1.compiled)
    first_ratio = d1.total(mask1) / o1.total(mask1) if mask1.any() else float("nan")
    compile_idx = np.flatnonzero(d1.compiled)
    reasons = list(dstats.get("recompile_reasons", []))

    print(f"\n## kiln dynamic='auto', cold pass over {n} calls")
    print(f"- compiles: {d1.new_compiles} (during {len(compile_idx)} calls); variants {dstats.get('variants')}; "
          f"variant_limit_hits {dstats.get('variant_limit_hits')}; traces {dstats.get('traces')}; "
          f"disk_hits {dstats.get('disk_hits')}; memory_hits {dstats.get('memory_hits')}; "
          f"fallbacks {dstats.get('fallbacks')}; backend_kernels {dstats.get('backend_kernels')}")
    if dstats.get("fallback_reasons"):
        print(f"- fallback_reasons ({len(dstats['fallback_reasons'])}): "
              + "; ".join(repr(s) for s in list(dict.fromkeys(dstats["fallback_reasons"]))[:5]))
    print(f"- total {fmt_time(d1.total())}; compile calls {fmt_time(d1.total(d1.compiled))}"
          f" (mean {fmt_time(d1.total(d1.compiled) / max(1, len(compile_idx)))}); "
          f"the other {n - len(compile_idx)} calls {fmt_time(d1.total(~d1.compiled))}")
    shown = ", ".join(f"#{i} T={int(tokens[i])} {fmt_time(d1.times[i])}" for i in compile_idx[:12])
    print(f"- compile calls: {shown}{' ...' if len(compile_idx) > 12 else ''}")
    print(f"- recompile_reasons ({len(reasons)}):")
    for s_ in reasons[:8]:
        print(f"    {s_!r}")
    if len(reasons) > 8:
        counts = collections.Counter(re.sub(r"\d+", "N", s_) for s_ in reasons)  # numbers -> N
        print(f"    ... {len(reasons) - 8} more; all {len(reasons)} grouped with numbers as N: "
              + "; ".join(f"{c}x {s_!r}" for s_, c in counts.most_common(4)))
    if d1.disk_loaded.any():
        print(f"- calls that loaded kernels from the disk cache: {int(d1.disk_loaded.sum())}")

    print(f"\n## kiln oracle (dynamic=False, {orc_note}): {len(distinct)} shapes precompiled untimed "
          f"in {fmt_time(orc_precompile)}")
    print(f"- after precompiling: {orc_pre_stats}; compiles during its timed pass: {o1.new_compiles}")
    if o1.new_compiles:
        print("- WARNING: the oracle compiled during its timed pass (variants evicted?); those calls are "
              "excluded from both sums")
    print(f"- timed pass {fmt_time(o1.total())}; over the {int(mask1.sum())} calls that did not compile in "
          f"either: dynamic {fmt_time(d1.total(mask1))} vs oracle {fmt_time(o1.total(mask1))}: "
          f"{first_ratio:.3f}x (first pass)")

    if reps:
        ratios = [r_[0] for r_ in reps]
        print(f"\n## steady state: {len(reps)} paired passes of the full trace (order alternating)")
        print("| rep | dynamic | oracle | calls compared | dynamic / oracle | compiles (dyn, oracle) |")
        print("| --- | --- | --- | --- | --- | --- |")
        for k, (ratio, td, to, m, cd, co) in enumerate(reps):
            print(f"| {k + 1} | {fmt_time(td)} | {fmt_time(to)} | {m} | {ratio:.3f}x | {cd}, {co} |")
        med, lo, hi = statistics.median(ratios), min(ratios), max(ratios)
        steady_dyn = statistics.median(r_[1] for r_ in reps)
        print(f"- median {med:.3f}x (min {lo:.3f}, max {hi:.3f})")
    else:
        med = lo = hi = None
        steady_dyn = None

    if j1 is not None:
        e2e = j1.total() / d1.total()
        print(f"\n## jax.jit (fresh; it specializes every shape): {jax.__version__}")
        print(f"- end to end {fmt_time(j1.total())} ({jax_compiles if jax_compiles is not None else '?'} "
              f"compiled shapes); kiln dynamic end to end {fmt_time(d1.total())}: jax / kiln = {e2e:.2f}x")
        print(f"- hot pass (every shape compiled) {fmt_time(jhot.total())}"
              + (f"; kiln dynamic steady (median) {fmt_time(steady_dyn)}: jax hot / kiln = "
                 f"{jhot.total() / steady_dyn:.2f}x" if steady_dyn else ""))
    else:
        e2e = None
        print(f"\n## jax.jit: {jax_note}")

    print(f"\n# load at the end: {machine_line().rsplit(', ', 1)[-1]}")

    # --- summary for benchmarks/RESULTS.md
    def met(ok):
        return "yes" if ok else "**no**"

    print(f"\n### Serving trace (issue 6), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    print(f"- Command: `{command}`")
    print(f"- Machine: {machine_line()}; {args.threads} thread(s); kiln isa {info.get('isa')}")
    print(f"- Trace: {n} calls, T ~ U{{1..{args.max_tokens}}} (seed {args.seed}), {len(distinct)} distinct T; "
          f"weights {args.weights}; float32; every engine checked against float64 numpy "
          f"({'FAILED' if failures else 'passed'})\n")
    print("| what | result | goal | met |")
    print("| --- | --- | --- | --- |")
    print(f"| compiles, kiln dynamic=\"auto\" | **{d1.new_compiles}** (variants {dstats.get('variants')}, "
          f"variant-limit hits {dstats.get('variant_limit_hits')}, {len(reasons)} recompile reasons) | <= 4 | "
          f"{met(d1.new_compiles <= 4)} |")
    if med is not None:
        print(f"| steady state vs oracle (every T precompiled), median of {len(reps)} paired passes | "
              f"**{med:.3f}x** (min {lo:.3f}, max {hi:.3f}); first pass {first_ratio:.3f}x over the "
              f"{int(mask1.sum())} non-compiling calls | <= 1.15x | {met(med <= 1.15)} |")
    else:
        print(f"| first pass vs oracle (every T precompiled), {int(mask1.sum())} non-compiling calls | "
              f"**{first_ratio:.3f}x** (no paired repetitions: --reps 0) | <= 1.15x | {met(first_ratio <= 1.15)} |")
    if e2e is not None:
        print(f"| end to end incl. compiles vs jax.jit ({jax_compiles if jax_compiles is not None else '?'} "
              f"jax compiles) | kiln {fmt_time(d1.total())} vs jax {fmt_time(j1.total())}: **{e2e:.1f}x** | "
              f">= 10x | {met(e2e >= 10)} |")
    else:
        print(f"| end to end vs jax.jit | n/a ({jax_note}) | >= 10x | n/a |")
    print(f"| kiln compile calls (cold cache) | {len(compile_idx)} calls, {fmt_time(d1.total(d1.compiled))} "
          f"(mean {fmt_time(d1.total(d1.compiled) / max(1, len(compile_idx)))}) | reported | |")
    if jhot is not None and steady_dyn:
        print(f"| hot trace, kiln dynamic (median) vs jax.jit with every shape compiled | "
              f"{fmt_time(steady_dyn)} vs {fmt_time(jhot.total())}: {jhot.total() / steady_dyn:.2f}x | "
              f"reported | |")

    if failures:
        print("\nWRONG RESULTS:", file=sys.stderr)
        for f_ in failures:
            print(f"  {f_}", file=sys.stderr)
        print("\n**RESULTS INVALID: an engine's output did not match the reference (see stderr)**")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
