"""What the GPU tests (gpu_train.py, gpu_offload.py, gpu_cupy.py) share:
each of their runs goes to a fresh interpreter -- a framework's allocator
can be chosen only once a process -- that writes its result as JSON.

    from _child import SKIP, PYDIR, log, run
    result, rc = run(__file__, ["--only", "b", ...], out_path, "gpu_train: config b", timeout=420)

rc is 0 (result: the child's JSON), SKIP (77: the child skipped, e.g. no
CUDA device) or 1 (it failed, wrote nothing, or ran past the timeout).
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.dirname(HERE)  # python/: the package under test comes first on PYTHONPATH
SKIP = 77


def log(*a):
    print(*a, flush=True)


def verdict(tag, fails, passed):
    """Log each failure as "TAG: FAIL: ..." or, with none, "TAG: PASS: "
    and passed() (called only then); the exit code, 1 or 0."""
    for f in fails:
        log(f"{tag}: FAIL: {f}")
    if not fails:
        log(f"{tag}: PASS: {passed()}")
    return 1 if fails else 0


def torch_or_skip(tag):
    """PyTorch, or exit with SKIP (logged under `tag`) where it does not
    import or sees no CUDA device."""
    try:
        import torch
    except Exception as e:
        log(f"{tag}: skipped: torch does not import ({e})")
        sys.exit(SKIP)
    if not torch.cuda.is_available():
        log(f"{tag}: skipped: no CUDA device")
        sys.exit(SKIP)
    return torch


def run(script, args, out, tag, timeout):
    """Run `script` with `args` plus ["--out", out] in a fresh interpreter
    (unbuffered; PYTHONPATH: python/ first). Returns (result, 0) with the
    JSON the child wrote to `out`, (None, SKIP) when it exited with SKIP, or
    (None, 1) when it failed, wrote nothing or was killed after `timeout`
    seconds; `tag` names the run in the log."""
    cmd = [sys.executable, "-u", os.path.abspath(script)] + [str(x) for x in args] + ["--out", out]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([PYDIR] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    try:
        rc = subprocess.run(cmd, env=env, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        log(f"{tag} killed after {timeout:.0f} s")
        return None, 1
    if rc == SKIP:
        return None, SKIP
    if rc != 0 or not os.path.exists(out):
        log(f"{tag} failed (exit {rc})")
        return None, 1
    with open(out) as f:
        return json.load(f), 0
