"""The graph pools' model (bench/pool_replay.py) against the library: run
test_torch_graph with GPUHEAP_POOL_LOG=1 and replay its pool log with
--check POLICY, which must make every choice the library made (every pool
of the test: captures, warm-ups, adoptions, another pool's capture,
releases).

  python3 pool_replay_model.py TEST_BINARY REPLAY_SCRIPT POLICY

POLICY rules runs the test as is, keep with GPUHEAP_POOL_SHARE=0."""
import os
import subprocess
import sys
import tempfile


def main():
    binary, script, policy = sys.argv[1:4]
    env = dict(os.environ, GPUHEAP_POOL_LOG="1")
    if policy == "keep":
        env["GPUHEAP_POOL_SHARE"] = "0"
    with tempfile.NamedTemporaryFile("w+", suffix=".log") as log:
        rc = subprocess.run([binary], stdout=subprocess.DEVNULL, stderr=log, env=env).returncode
        if rc != 0:
            print(f"pool_replay_model: {binary} exited {rc}")
            return 1
        log.flush()
        lines = sum(1 for line in open(log.name) if line.startswith("gpuheap pool: "))
        print(f"pool_replay_model: {lines} pool log lines")
        if lines < 100:
            return 1
        return subprocess.run([sys.executable, script, log.name, "--check", policy]).returncode


if __name__ == "__main__":
    sys.exit(main())
