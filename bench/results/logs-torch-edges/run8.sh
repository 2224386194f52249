#!/usr/bin/env bash
# Device visit 32, run 8: gpu_edges.py after its graph cases run a second
# graph (the library as in run 7). expectation6.txt was written before.
# $OUT set by the device tool.
exec bash bench/results/logs-torch-edges/edges.sh
