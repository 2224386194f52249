#!/usr/bin/env bash
# Device visit 31, part 6: gpu_edges.py with its stats case (torch.cuda's
# memory figures answered by gpuheap: enable(torch_stats=True)). Expected:
# every case ok, device skipped (one GPU); stats allocated == memory_stats'
# current >= 64 MiB, peak >= 64 MiB, the peak after a reset below it.
# $OUT set by the device tool.
exec bash bench/results/logs-torch-edges/edges.sh
