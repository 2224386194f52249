#!/usr/bin/env bash
# Device visit 32, run 11: gpu_edges.py with its graph_callables case
# (torch.cuda.make_graphed_callables: two captures sharing one pool).
# expectation9.txt was written before. $OUT set by the device tool.
exec bash bench/results/logs-torch-edges/edges.sh
