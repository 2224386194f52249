#!/usr/bin/env bash
# Device visit 32, run 15: gpu_edges.py with its fraction case
# (torch.cuda.set_per_process_memory_fraction setting gpuheap's device
# budget). expectation13.txt was written before. $OUT set by the device tool.
exec bash bench/results/logs-torch-edges/edges.sh
