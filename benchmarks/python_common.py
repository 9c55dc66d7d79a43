"""Helpers of the Python benchmarks: timing by repetition (>= 0.2 s per measurement, median and
spread), thread pinning, a machine line."""

import os
import platform
import statistics
import time


def pin_threads(n):
    """Pins kiln, numpy's BLAS and XLA to n threads (call before importing them), and the process
    to n CPUs where it has more: XLA's CPU runtime sizes its own pool by the CPUs it may use, and
    the threads it starts later inherit the affinity set here."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if 0 < n < len(cpus):
        os.sched_setaffinity(0, cpus[:n])
    for var in ("KILN_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(n)
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               f" --xla_cpu_multi_thread_eigen={'true' if n > 1 else 'false'}"
                               f" intra_op_parallelism_threads={n}")


def private_cache():
    """A cold, private kiln cache (call before importing kiln), so first calls trace and compile."""
    import tempfile

    os.environ.setdefault("KILN_CACHE_DIR", tempfile.mkdtemp(prefix="kiln-bench-"))


def import_jax():
    """(jax, jax.numpy) on the CPU, or (None, None) with a note when jax is not installed."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        print("jax not installed (benchmarks/setup-python)")
        return None, None
    jax.config.update("jax_platforms", "cpu")
    return jax, jnp


def measure(fn, min_time=0.2, repeats=7):
    """Median and (min, max) seconds per call of fn(), after a warm-up."""
    fn()
    n = 1
    while True:  # calibrate the batch so one measurement takes >= min_time
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt >= min_time:
            break
        n = max(n * 2, int(n * min_time / max(dt, 1e-9) * 1.2))
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - t0) / n)
    return statistics.median(samples), min(samples), max(samples)


def first_call(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def machine_line():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load = "load average %.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        load = "load average n/a"
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {load}"


def fmt_time(s):
    if s < 1e-6:
        return f"{s * 1e9:.0f} ns"
    if s < 1e-3:
        return f"{s * 1e6:.2f} us"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"
