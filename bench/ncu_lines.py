#!/usr/bin/env python3
"""Per-source-line totals of an Nsight Compute report's per-instruction metrics.

ncu's SourceCounters section records metrics per SASS instruction (executed
instructions, threads executed, warp stall samples by reason); its CLI prints
them per instruction, which for an allocator inlined into every kernel is tens
of megabytes. This sums them per source line (file:line, through the
report's line information: build with -lineinfo) and prints, for each kernel,
the lines that hold the most stall samples, with their executed instructions
and the threads active per executed instruction.

    python3 bench/ncu_lines.py REPORT.ncu-rep [--top N] [--kernel REGEX]

Runs where Nsight Compute is installed: it imports ncu_report from the
extras/python folder next to the ncu on PATH (or $NCU_PYTHON).
"""
import argparse
import glob
import os
import re
import shutil
import sys
from collections import defaultdict


def import_ncu_report():
    paths = [os.environ.get("NCU_PYTHON", "")]
    ncu = shutil.which("ncu")
    if ncu:
        root = os.path.dirname(os.path.realpath(ncu))
        paths += [os.path.join(root, "extras", "python"), os.path.join(root, "..", "extras", "python")]
    paths += glob.glob("/opt/nvidia/nsight-compute/*/extras/python")
    paths += glob.glob("/usr/local/cuda*/nsight-compute*/extras/python")
    for p in paths:
        if p and os.path.isfile(os.path.join(p, "ncu_report.py")):
            sys.path.insert(0, p)
            break
    import ncu_report  # noqa: E402  (raises ImportError with the paths tried)

    return ncu_report


def per_line(action, metric):
    """{(file, line): sum} of an instanced metric keyed by PC."""
    out = defaultdict(float)
    ids = metric.correlation_ids()
    for i in range(metric.num_instances()):
        pc = ids.as_uint64(i)
        try:
            info = action.source_info(pc)
            key = (os.path.basename(info.file_name()), info.line()) if info else ("?", 0)
        except Exception:  # no line information for this PC
            key = ("?", 0)
        out[key] += metric.as_double(i)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--kernel", default=".")
    args = ap.parse_args(argv)
    ncu_report = import_ncu_report()
    ctx = ncu_report.load_report(args.report)
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            name = action.name()
            if not re.search(args.kernel, name):
                continue
            print(f"== {name}")
            instanced = {}
            for m in action.metric_names():
                metric = action.metric_by_name(m)
                try:
                    if metric.has_correlation_ids() and metric.num_instances() > 0:
                        instanced[m] = metric
                except Exception:
                    continue
            print("per-instruction metrics:", ", ".join(sorted(instanced)))
            # The sampler's total and its stall reasons (each reason also has a
            # "_not_issued" part of itself, left out).
            total = next((m for m in instanced if m.endswith("pcsamp_sample_count")), None)
            samp = [m for m in instanced if "pcsamp_warps_issue_stalled_" in m and not m.endswith("_not_issued")]
            inst = next((m for m in instanced if m in ("inst_executed", "smsp__sass_inst_executed")), None)
            thr = next((m for m in instanced if m in ("thread_inst_executed", "smsp__sass_thread_inst_executed")), None)
            lines = defaultdict(lambda: defaultdict(float))
            for m in [x for x in (total, inst, thr) if x] + samp:
                for key, v in per_line(action, instanced[m]).items():
                    lines[key][m] += v
            order = total or (samp[0] if samp else inst)
            if order is None:
                print("no per-instruction metrics: was the SourceCounters section collected?")
                continue
            grand = sum(v[order] for v in lines.values()) or 1.0
            print(f"{'line':<28} {'samples %':>9} {'inst exec':>12} {'thr/inst':>8}  top stall reasons")
            for key, v in sorted(lines.items(), key=lambda kv: -kv[1][order])[: args.top]:
                reasons = sorted(((v[m], m) for m in samp), reverse=True)[:3]
                rs = ", ".join(f"{re.sub(r'^.*stalled_', '', m)} {x / max(v[order], 1):.0%}" for x, m in reasons if x > 0)
                ie = v.get(inst, 0) if inst else 0
                ti = v.get(thr, 0) / ie if thr and ie else 0
                print(f"{key[0] + ':' + str(key[1]):<28} {100 * v[order] / grand:9.1f} {ie:12.0f} {ti:8.1f}  {rs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
