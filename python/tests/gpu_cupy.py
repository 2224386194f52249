#!/usr/bin/env python3
"""GPU test: CuPy on gpuheap with arrays that do not fit the device budget.

Runs the same work twice, each in its own process: (plain) CuPy's own
allocator, (gpuheap) gpuheap.cupy.enable() with a small device budget
(--budget, default 256 MiB) while the live arrays take --arrays x --n^2
complex64 (default 12 x 2048^2 x 8 B = 384 MiB) plus their FFTs. The work:
per array a 2-D FFT, a filter, the inverse FFT, and reductions (sum, max of
magnitudes, norm); every array stays alive to the end, so gpuheap must keep
some of them on the host. Checks: every result (SHA-256 of the arrays' bytes,
the reductions' bits) equal in both runs; the gpuheap run evicted frames and
met no out-of-memory.

  python3 python/tests/gpu_cupy.py [--arrays 12 --n 2048 --budget 256MiB]

Exit: 0 pass, 1 fail, 77 skipped (no CuPy, no CUDA device, no libgpuheap).
"""
import argparse
import hashlib
import json
import os
import sys
import tempfile

from _child import PYDIR, SKIP, log, run as run_child, verdict


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arrays", type=int, default=12)
    ap.add_argument("--n", type=int, default=2048, help="side of each square complex64 array")
    ap.add_argument("--budget", default="256MiB", help="gpuheap's device budget")
    ap.add_argument("--host-budget", default="4GiB")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-limit", type=float, default=300, help="seconds per run")
    ap.add_argument("--only", choices=["plain", "gpuheap"], help="one run in this process (internal)")
    ap.add_argument("--out", help="the run's JSON result (internal)")
    return ap.parse_args(argv)


def cupy_or_skip():
    try:
        import cupy
        import numpy  # noqa: F401  (the results are checked on the host)
        del numpy
    except Exception as e:
        log(f"gpu_cupy: skipped: cupy/numpy do not import ({e})")
        sys.exit(SKIP)
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("no device")
    except Exception as e:
        log(f"gpu_cupy: skipped: no CUDA device ({e})")
        sys.exit(SKIP)
    return cupy


def digest(cupy, a):
    return hashlib.sha256(cupy.asnumpy(a).tobytes()).hexdigest()


def child(a):
    cupy = cupy_or_skip()
    import numpy as np
    m = None
    if a.only == "gpuheap":
        sys.path.insert(0, PYDIR)
        import gpuheap
        import gpuheap.cupy
        try:
            gpuheap.library()
        except gpuheap.Error as e:
            log(f"gpu_cupy[gpuheap]: skipped: {e}")
            sys.exit(SKIP)
        m = gpuheap.cupy.enable(device_budget=a.budget, host_budget=a.host_budget)
        st = m.stats()
        log(f"gpu_cupy[gpuheap]: device budget {st['device_budget'] >> 20} MiB, host {st['host_budget'] >> 20} MiB")
    rng = np.random.RandomState(a.seed)
    n = a.n
    filt = cupy.asarray(np.exp(-np.add.outer(np.fft.fftfreq(n) ** 2, np.fft.fftfreq(n) ** 2) * 40.0)
                        .astype(np.float32))
    arrays, spectra, results = [], [], []
    for i in range(a.arrays):
        host = (rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))).astype(np.complex64)
        x = cupy.asarray(host)
        f = cupy.fft.fft2(x)
        y = cupy.fft.ifft2(f * filt)
        arrays.append(y)
        spectra.append(f)
        r = {"sum": complex(y.sum().get()), "max_abs": float(cupy.abs(f).max().get()),
             "norm": float(cupy.linalg.norm(y).get())}
        results.append({"sum": [r["sum"].real.hex(), r["sum"].imag.hex()], "max_abs": r["max_abs"].hex(),
                        "norm": r["norm"].hex()})
        extra = ""
        if m is not None:
            st = m.stats()
            extra = f" dev {st['frames']['device']} host {st['frames']['host']} frames, evictions {st['evictions']}"
        log(f"gpu_cupy[{a.only}] array {i}: norm {r['norm']:.6e}{extra}")
    # Use every array again after all were made: the early ones come back from the host.
    total = cupy.zeros((n, n), cupy.complex64)
    for y in arrays:
        total += y
    out = {"results": results, "digests": [digest(cupy, y) for y in arrays] + [digest(cupy, f) for f in spectra],
           "total": digest(cupy, total), "oom": False}
    if m is not None:
        st = m.stats()
        out["stats"] = st
        out["oom"] = st["oom_events"] > 0
        log(f"gpu_cupy[gpuheap]: evictions {st['evictions']} restores {st['restores']} "
            f"moved {(st['bytes_evicted'] + st['bytes_restored']) >> 20} MiB")
    with open(a.out, "w") as f:
        json.dump(out, f)
    return 0


def run(a, which, tmp):
    log(f"gpu_cupy: run {which}")
    args = ["--only", which, "--arrays", a.arrays, "--n", a.n, "--budget", a.budget, "--host-budget", a.host_budget,
            "--seed", a.seed]
    return run_child(__file__, args, os.path.join(tmp, which + ".json"), f"gpu_cupy: {which}", a.time_limit)


def parent(a):
    cupy_or_skip()
    with tempfile.TemporaryDirectory() as tmp:
        plain, rc = run(a, "plain", tmp)
        if rc:
            return rc
        gh, rc = run(a, "gpuheap", tmp)
        if rc:
            return rc
    fails = []
    for key in ("results", "digests", "total"):
        if plain[key] != gh[key]:
            fails.append(f"{key} differ between the plain and the gpuheap run")
    if gh["stats"]["evictions"] <= 0:
        fails.append("the gpuheap run evicted nothing (raise --arrays or lower --budget)")
    if gh["oom"]:
        fails.append("the gpuheap run met an out-of-memory")
    return verdict("gpu_cupy", fails, lambda: f"{a.arrays} arrays of {a.n}^2 complex64, results bitwise equal; "
                   f"{gh['stats']['evictions']} frames evicted, {gh['stats']['restores']} restored")


def main(argv=None):
    a = parse_args(argv)
    return child(a) if a.only else parent(a)


if __name__ == "__main__":
    sys.exit(main())
