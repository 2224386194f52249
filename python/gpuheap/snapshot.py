"""Snapshots of a tensor manager: a JSON-able dict, and pictures of its frame
map (HTML with inline SVG, no dependencies; PNG where matplotlib imports).

    from gpuheap import snapshot
    s = snapshot.snapshot(manager)          # or None: the global manager
    snapshot.write_html("frames.html", s)
    snapshot.write_png("frames.png", s)     # needs matplotlib

From a saved snapshot:  python -m gpuheap.snapshot snap.json --html f.html --png f.png

Every cell of the picture is one 2 MiB frame, in address order, coloured by
where its bytes live: device (HBM), host (pinned host memory at the same
address), device-heap frames; a frame with no live tensor is "free"
(mapped but empty). A thick black outline marks a frame that holds a pinned
tensor; the filled height of a cell is the fraction of the frame its
tensors use; the stripe on top is the kind of its tensors. A hatched cell
stands for a gap of unmapped addresses between two mapped frames.
"""
import datetime
import html
import json
import os
import sys

SNAPSHOT_VERSION = 1
TIERS = ("device", "host", "none")
KINDS = ("workspace", "activations", "optimizer", "weights")

# Colours (RGB hex) of the picture; the legend reads from the same table.
COLORS = {
    "device": "#2b7bba",
    "host": "#e8743b",
    "heap": "#7b5ea7",
    "free": "#d9d9d9",
    "gap": "#f4f4f4",
    "kind.workspace": "#bdbdbd",
    "kind.activations": "#66c2a5",
    "kind.optimizer": "#ffd92f",
    "kind.weights": "#e7298a",
    "kind.heap": "#7b5ea7",
}
LEGEND = [("device", "device (HBM)"), ("host", "host (pinned, same address)"), ("heap", "device-heap frame"),
          ("free", "mapped, no live tensor"), ("gap", "unmapped addresses")]


def _now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def snapshot(manager=None, frames=True):
    """The state of a manager as a JSON-able dict:

    {"version", "time", "frame_bytes", "budgets": {"device", "host"},
     "tiers": {tier: {"frames", "heap_frames", "bytes", "tensor_bytes"}},
     "kinds": {kind: {"tensors", "bytes", "bytes_by_tier": {tier: bytes}}},
     "counters": {"evictions", "restores", "bytes_evicted", "bytes_restored",
                  "oom_events", "heap_grows", "heap_shrinks", "pinned_tensors",
                  "pending_frees", "host_pool_frames"},
     "frames": [{"va", "tier", "kind", "pinned", "heap", "tensors", "used_bytes"}]
               or None with "frames_error" when the library has no frame map}

    manager: a gpuheap.Manager (None: the global manager) or anything with
    stats() and frame_map() returning what Manager's do."""
    if manager is None:
        import gpuheap
        manager = gpuheap.global_manager()
    st = manager.stats()
    fb = st["frame_bytes"]
    tiers = {}
    for t in TIERS:
        tiers[t] = {"frames": st["frames"][t], "heap_frames": st["heap_frames"][t],
                    "bytes": (st["frames"][t] + st["heap_frames"][t]) * fb if t != "none" else 0,
                    "tensor_bytes": sum(st["tensor_bytes_tier"][k][t] for k in KINDS)}
    kinds = {k: {"tensors": st["tensors"][k], "bytes": st["tensor_bytes"][k],
                 "bytes_by_tier": dict(st["tensor_bytes_tier"][k])} for k in KINDS}
    counters = {c: st[c] for c in ("evictions", "restores", "bytes_evicted", "bytes_restored", "oom_events",
                                   "heap_grows", "heap_shrinks", "pinned_tensors", "pending_frees",
                                   "host_pool_frames")}
    snap = {"version": SNAPSHOT_VERSION, "time": _now(), "frame_bytes": fb,
            "budgets": {"device": st["device_budget"], "host": st["host_budget"]},
            "tiers": tiers, "kinds": kinds, "counters": counters, "frames": None}
    if frames:
        try:
            snap["frames"] = [dict(f) for f in manager.frame_map()]
        except Exception as e:  # an older library: the summary still stands
            snap["frames_error"] = str(e)
    return snap


def layout(snap, columns=64):
    """The cells of the picture: a list of rows, each a list of cells
    {"x", "y", "state", "frame"} with state one of device / host / heap /
    free / gap (frame None for a gap). Consecutive mapped frames are adjacent
    cells; any run of unmapped addresses between two of them is one gap cell."""
    fb = snap["frame_bytes"] or 1
    cells = []
    prev = None
    for f in snap.get("frames") or []:
        if prev is not None and f["va"] > prev + fb:
            cells.append({"state": "gap", "frame": None, "gap_frames": (f["va"] - prev) // fb - 1})
        if f.get("heap"):
            state = "heap"
        elif f.get("tensors", 0) == 0:
            state = "free"
        else:
            state = f["tier"] if f["tier"] in ("device", "host") else "free"
        cells.append({"state": state, "frame": f})
        prev = f["va"]
    for i, c in enumerate(cells):
        c["x"], c["y"] = i % columns, i // columns
    return cells


def _fmt_bytes(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def _cell_title(c, fb):
    f = c["frame"]
    if f is None:
        return f"unmapped: {c.get('gap_frames', 0)} frames"
    return (f"{f['va']:#x}  {f['tier']}  kind {f['kind']}  {f['tensors']} tensors  "
            f"{_fmt_bytes(f['used_bytes'])} of {_fmt_bytes(fb)}{'  PINNED' if f['pinned'] else ''}")


def _summary_rows(snap):
    rows = []
    b = snap["budgets"]
    for t in ("device", "host"):
        ti = snap["tiers"][t]
        rows.append((t, ti["frames"], ti["heap_frames"], _fmt_bytes(ti["bytes"]), _fmt_bytes(ti["tensor_bytes"]),
                     _fmt_bytes(b[t])))
    return rows


def to_text(snap, title="gpuheap memory summary"):
    """The snapshot's summary as plain text: per tier its frames, bytes
    mapped, tensors' bytes and budget; per kind its tensors and bytes by
    tier; the counters. (The frames themselves are left out: see to_html.)"""
    lines = [title, "=" * len(title),
             f"{'tier':<8}{'frames':>8}{'heap':>7}{'mapped':>13}{'tensors':>13}{'budget':>13}"]
    for t, frames, heap, mapped, tensors, budget in _summary_rows(snap):
        lines.append(f"{t:<8}{frames:>8}{heap:>7}{mapped:>13}{tensors:>13}{budget:>13}")
    lines += ["", f"{'kind':<13}{'tensors':>9}{'bytes':>13}{'device':>13}{'host':>13}"]
    for k, v in snap["kinds"].items():
        bt = v["bytes_by_tier"]
        lines.append(f"{k:<13}{v['tensors']:>9}{_fmt_bytes(v['bytes']):>13}{_fmt_bytes(bt.get('device', 0)):>13}"
                     f"{_fmt_bytes(bt.get('host', 0)):>13}")
    c = snap["counters"]
    lines += ["", "  ".join(f"{k} {_fmt_bytes(v) if k.startswith('bytes_') else v}" for k, v in c.items())]
    return "\n".join(lines) + "\n"


def to_html(snap, columns=64, cell=12, title="gpuheap frame map"):
    """The snapshot as one self-contained HTML page (inline SVG, no scripts)."""
    fb = snap["frame_bytes"] or 1
    cells = layout(snap, columns)
    rows = max(1, (len(cells) + columns - 1) // columns)
    e = html.escape
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{columns * cell + 2}" height="{rows * cell + 2}" '
           f'role="img" aria-label="frame map">',
           '<defs><pattern id="gap" width="4" height="4" patternUnits="userSpaceOnUse" '
           'patternTransform="rotate(45)"><rect width="4" height="4" fill="#f4f4f4"/>'
           '<line x1="0" y1="0" x2="0" y2="4" stroke="#bbb" stroke-width="1.5"/></pattern></defs>']
    for c in cells:
        x, y = 1 + c["x"] * cell, 1 + c["y"] * cell
        f = c["frame"]
        tip = f"<title>{e(_cell_title(c, fb))}</title>"
        if f is None:
            svg.append(f'<rect x="{x}" y="{y}" width="{cell - 1}" height="{cell - 1}" fill="url(#gap)">{tip}</rect>')
            continue
        col = COLORS[c["state"]]
        svg.append(f'<g>{tip}<rect x="{x}" y="{y}" width="{cell - 1}" height="{cell - 1}" fill="{col}" '
                   f'fill-opacity="0.25"/>')
        frac = min(1.0, f["used_bytes"] / fb) if c["state"] != "heap" else 1.0
        h = (cell - 1) * frac
        if h > 0:
            svg.append(f'<rect x="{x}" y="{y + cell - 1 - h:.2f}" width="{cell - 1}" height="{h:.2f}" fill="{col}"/>')
        kc = COLORS.get("kind." + f["kind"])
        if kc and c["state"] != "free":
            svg.append(f'<rect x="{x}" y="{y}" width="{cell - 1}" height="2" fill="{kc}"/>')
        if f["pinned"]:
            svg.append(f'<rect x="{x + 0.75}" y="{y + 0.75}" width="{cell - 2.5}" height="{cell - 2.5}" '
                       f'fill="none" stroke="#000" stroke-width="1.5"/>')
        svg.append("</g>")
    svg.append("</svg>")

    legend = "".join(f'<span class="lg"><span class="sw" style="background:{COLORS[k]}"></span>{e(t)}</span>'
                     for k, t in LEGEND)
    legend += '<span class="lg"><span class="sw" style="border:2px solid #000"></span>pinned tensor</span>'
    legend += "".join(f'<span class="lg"><span class="sw" style="background:{COLORS["kind." + k]}"></span>'
                      f'{e(k)}</span>' for k in KINDS)
    summ = "".join(f"<tr><td>{e(str(r[0]))}</td>" + "".join(f"<td>{e(str(v))}</td>" for v in r[1:]) + "</tr>"
                   for r in _summary_rows(snap))
    kinds = "".join(f"<tr><td>{e(k)}</td><td>{v['tensors']}</td><td>{e(_fmt_bytes(v['bytes']))}</td>"
                    f"<td>{e(_fmt_bytes(v['bytes_by_tier']['device']))}</td>"
                    f"<td>{e(_fmt_bytes(v['bytes_by_tier']['host']))}</td></tr>"
                    for k, v in snap["kinds"].items())
    cnt = "".join(f"<tr><td>{e(k)}</td><td>{e(str(v))}</td></tr>" for k, v in snap["counters"].items())
    note = ""
    if snap.get("frames") is None:
        note = f"<p><b>No frame map:</b> {e(snap.get('frames_error', 'not taken'))}</p>"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>
<style>
body {{ font: 13px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }}
table {{ border-collapse: collapse; margin: 0.5em 2em 1em 0; display: inline-table; vertical-align: top; }}
td, th {{ border: 1px solid #ccc; padding: 2px 8px; text-align: right; }}
td:first-child, th:first-child {{ text-align: left; }}
.lg {{ margin-right: 1.2em; white-space: nowrap; }}
.sw {{ display: inline-block; width: 11px; height: 11px; margin-right: 4px; vertical-align: -1px; }}
</style></head><body>
<h1>{e(title)}</h1>
<p>{e(snap.get("time", ""))} &middot; frame {e(_fmt_bytes(fb))} &middot;
{len(snap.get("frames") or [])} mapped frames; one cell per frame, in address order
(hover a cell for its address and contents).</p>
{note}
<p>{legend}</p>
{"".join(svg)}
<h2>Tiers</h2>
<table><tr><th>tier</th><th>tensor frames</th><th>heap frames</th><th>mapped</th><th>tensor bytes</th>
<th>budget</th></tr>{summ}</table>
<table><tr><th>kind</th><th>tensors</th><th>bytes</th><th>on device</th><th>on host</th></tr>{kinds}</table>
<table><tr><th>counter</th><th>value</th></tr>{cnt}</table>
</body></html>
"""


def write_json(path, snap=None):
    """Write a snapshot (or take one of the global manager) as JSON."""
    snap = snapshot() if snap is None else _as_snap(snap)
    with open(path, "w") as f:
        json.dump(snap, f, indent=1)
    return snap


def _as_snap(s):
    """A snapshot dict from a snapshot, a manager, or a JSON file name."""
    if isinstance(s, dict):
        return s
    if isinstance(s, str):
        with open(s) as f:
            return json.load(f)
    return snapshot(s)


def write_html(path, snap=None, **kw):
    """Write the picture of a snapshot (dict, manager, or None for the global
    manager) as a self-contained HTML page."""
    snap = snapshot() if snap is None else _as_snap(snap)
    with open(path, "w", encoding="utf-8") as f:
        f.write(to_html(snap, **kw))
    return snap


def _rgb(hexcol):
    return tuple(int(hexcol[i:i + 2], 16) / 255 for i in (1, 3, 5))


def _png_in_child(path, snap, columns, title, dpi):
    """Draw the PNG in a fresh interpreter (python -m gpuheap.snapshot):
    matplotlib is installed but does not load in this process (its compiled
    modules can clash with ones loaded before, e.g. by PyTorch). Returns
    None when done, else why not."""
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "snapshot.json")
        with open(src, "w") as f:
            json.dump(snap, f)
        env = dict(os.environ, GPUHEAP_PNG_CHILD="1")
        pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = os.pathsep.join([pkg_parent] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        p = subprocess.run([sys.executable, "-m", "gpuheap.snapshot", src, "--png", path, "--columns", str(columns),
                            "--title", title, "--dpi", str(dpi)], env=env, capture_output=True, text=True,
                           timeout=300)
    return None if p.returncode == 0 else (p.stderr.strip().splitlines() or ["no output"])[-1]


def write_png(path, snap=None, columns=64, title="gpuheap frame map", dpi=120):
    """Write the picture as PNG (matplotlib, Agg backend). Where matplotlib
    is installed but does not load in this process, a fresh interpreter
    draws it. gpuheap.Error ERR_UNSUPPORTED where neither can."""
    try:
        import matplotlib
        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch, Rectangle
    except Exception as ex:
        import gpuheap
        import importlib.util
        try:
            installed = importlib.util.find_spec("matplotlib") is not None
        except (ImportError, ValueError):  # hidden (sys.modules entry None) or broken
            installed = False
        why = f"write_png needs matplotlib ({ex})"
        if installed and not os.environ.get("GPUHEAP_PNG_CHILD"):
            snap = snapshot() if snap is None else _as_snap(snap)
            child = _png_in_child(path, snap, columns, title, dpi)
            if child is None:
                return snap
            why += f"; a fresh interpreter failed too ({child})"
        raise gpuheap.Error(gpuheap.ERR_UNSUPPORTED, why, "snapshot.write_png")
    snap = snapshot() if snap is None else _as_snap(snap)
    fb = snap["frame_bytes"] or 1
    cells = layout(snap, columns)
    rows = max(1, (len(cells) + columns - 1) // columns)
    fig_w = max(6.0, columns * 0.16)
    fig, ax = plt.subplots(figsize=(fig_w, max(1.5, rows * 0.16) + 1.6))
    for c in cells:
        x, y = c["x"], rows - 1 - c["y"]
        f = c["frame"]
        if f is None:
            ax.add_patch(Rectangle((x, y), 0.92, 0.92, facecolor=_rgb(COLORS["gap"]), hatch="////",
                                   edgecolor="#bbbbbb", linewidth=0))
            continue
        col = _rgb(COLORS[c["state"]])
        ax.add_patch(Rectangle((x, y), 0.92, 0.92, facecolor=col, alpha=0.25, linewidth=0))
        frac = 1.0 if c["state"] == "heap" else min(1.0, f["used_bytes"] / fb)
        if frac > 0:
            ax.add_patch(Rectangle((x, y), 0.92, 0.92 * frac, facecolor=col, linewidth=0))
        kc = COLORS.get("kind." + f["kind"])
        if kc and c["state"] != "free":
            ax.add_patch(Rectangle((x, y + 0.80), 0.92, 0.12, facecolor=_rgb(kc), linewidth=0))
        if f["pinned"]:
            ax.add_patch(Rectangle((x + 0.04, y + 0.04), 0.84, 0.84, fill=False, edgecolor="black", linewidth=1.2))
    ax.set_xlim(-0.1, columns)
    ax.set_ylim(-0.1, rows)
    ax.set_aspect("equal")
    ax.axis("off")
    t = snap["tiers"]
    ax.set_title(f"{title}: device {_fmt_bytes(t['device']['bytes'])} / {_fmt_bytes(snap['budgets']['device'])}, "
                 f"host {_fmt_bytes(t['host']['bytes'])} / {_fmt_bytes(snap['budgets']['host'])}, "
                 f"{snap['counters']['evictions']} evictions", fontsize=9)
    handles = [Patch(facecolor=COLORS[k], label=lbl) for k, lbl in LEGEND]
    handles.append(Patch(facecolor="white", edgecolor="black", label="pinned tensor"))
    handles += [Patch(facecolor=COLORS["kind." + k], label=k) for k in KINDS]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.02), ncol=5, fontsize=7, frameon=False)
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return snap


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(prog="python -m gpuheap.snapshot",
                                 description="Draw a saved gpuheap snapshot (JSON).")
    ap.add_argument("snapshot", help="a JSON file written by gpuheap.snapshot.write_json")
    ap.add_argument("--html", help="write the HTML picture here")
    ap.add_argument("--png", help="write the PNG picture here (needs matplotlib)")
    ap.add_argument("--columns", type=int, default=64)
    ap.add_argument("--title", default="gpuheap frame map", help="the PNG's title")
    ap.add_argument("--dpi", type=int, default=120, help="the PNG's resolution")
    a = ap.parse_args(argv)
    snap = _as_snap(a.snapshot)
    if a.html:
        write_html(a.html, snap, columns=a.columns)
    if a.png:
        write_png(a.png, snap, columns=a.columns, title=a.title, dpi=a.dpi)
    if not a.html and not a.png:
        json.dump({k: snap[k] for k in ("tiers", "kinds", "counters")}, sys.stdout, indent=1)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
