#!/usr/bin/env bash
# Device visit 32, run 16: gpu_edges.py at the session's last library
# change (the memory fraction's budget capped at what the device can
# give). Expected as run 15 (expectation13.txt): every case ok, the
# fraction's budget 810 MiB (0.01 of the device is far below the cap).
# $OUT set by the device tool.
exec bash bench/results/logs-torch-edges/edges.sh
