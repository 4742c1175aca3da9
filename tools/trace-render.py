#!/usr/bin/env python3
"""Render a protocol timeline (`qemu-run.sh trace -o FILE.json`, Chrome
trace-event JSON) as an SVG picture: one row per instance and track, spans
as boxes, instant events as ticks, flow arrows from a request to its
serving and back. Standard library only.

    tools/trace-render.py TRACE.json OUT.svg [--title TEXT] [--gap-us US]

The window runs from the first to the last protocol event (requests,
serving, disk reads, invalidations, acks, installs, evictions, tasks:
not sleeps and doorbells). Stretches longer than --gap-us (default 5000)
in which no such event starts or ends are cut short and marked with
their length, so a remote read of tens of microseconds and the seconds
between shell commands fit one picture.
"""

import argparse
import html
import json
import sys

ROW_H = 26
LABEL_W = 230
PLOT_W = 1100
MAX_CUT_W = 30
TOP = 60
COLORS = {
    "request": "#4e79a7",
    "serve": "#f28e2b",
    "disk": "#e15759",
    "sleep": "#bab0ac",
    "eviction": "#76b7b2",
    "task": "#59a14f",
    "other": "#9c755f",
}
INSTANT_COLORS = {
    "inv_sent": "#b07aa1",
    "inv_taken": "#b07aa1",
    "ack_sent": "#edc948",
    "ack_taken": "#edc948",
    "lazy_ack": "#ff9da7",
    "install": "#59a14f",
}


def color_of(name):
    for key in ("request", "serve", "disk", "sleep", "eviction", "task"):
        if name.startswith(key):
            return COLORS[key]
    return COLORS["other"]


def fmt_us(us):
    if us >= 1e6:
        return f"{us / 1e6:.2f} s"
    if us >= 1e3:
        return f"{us / 1e3:.2f} ms"
    return f"{us:.1f} us"


class Axis:
    """Piecewise-linear time axis: quiet gaps cut to CUT_W pixels."""

    def __init__(self, times, gap_us, t0, t1):
        times = sorted(t for t in set(times) if t0 <= t <= t1)
        self.cuts = []  # (start, end) of every cut gap
        for a, b in zip(times, times[1:]):
            if b - a > gap_us:
                self.cuts.append((a + gap_us / 4, b - gap_us / 4))
        self.t0, self.t1 = t0, t1
        kept = (t1 - t0) - sum(b - a for a, b in self.cuts)
        # The cuts take at most a third of the width.
        self.cut_w = min(MAX_CUT_W, PLOT_W / 3 / max(1, len(self.cuts)))
        room = PLOT_W - self.cut_w * len(self.cuts)
        self.scale = room / kept if kept > 0 else 1.0

    def x(self, t):
        t = min(max(t, self.t0), self.t1)
        px = 0.0
        prev = self.t0
        for a, b in self.cuts:
            if t <= a:
                break
            px += (a - prev) * self.scale
            if t < b:
                return LABEL_W + px + self.cut_w * (t - a) / (b - a)
            px += self.cut_w
            prev = b
        return LABEL_W + px + (t - prev) * self.scale


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--title", default="onecopy protocol timeline")
    ap.add_argument("--gap-us", type=float, default=5000.0)
    args = ap.parse_args()
    with open(args.trace, encoding="utf-8") as f:
        events = json.load(f)["traceEvents"]

    procs, threads = {}, {}
    for e in events:
        if e.get("ph") == "M" and e["name"] == "process_name":
            procs[e["pid"]] = e["args"]["name"]
        if e.get("ph") == "M" and e["name"] == "thread_name":
            threads[(e["pid"], e["tid"])] = e["args"]["name"]
    dir_pids = {p for p, n in procs.items() if n == "directory"}
    timed = [e for e in events if e.get("ph") in ("X", "i", "s", "f")]

    def protocol(e):
        return e["ph"] in ("X", "i") and e["name"] != "sleep" and not e["name"].startswith("bell")

    bounds = []
    for e in filter(protocol, timed):
        bounds.append(e["ts"])
        if e["ph"] == "X":
            bounds.append(e["ts"] + e["dur"])
    if not bounds:
        sys.exit("trace-render: no protocol events in " + args.trace)
    margin = 200.0
    t0, t1 = min(bounds) - margin, max(bounds) + margin

    def inside(e):
        end = e["ts"] + e.get("dur", 0)
        return end >= t0 and e["ts"] <= t1

    timed = [e for e in timed if inside(e)]
    axis = Axis(bounds + [t0, t1], args.gap_us, t0, t1)

    # Rows: the directory first, then the nodes; tracks in tid order.
    used = sorted({(e["pid"], e["tid"]) for e in timed if e.get("ph") in ("X", "i")},
                  key=lambda pt: (pt[0] not in dir_pids, pt[0], pt[1]))
    row = {pt: i for i, pt in enumerate(used)}
    height = TOP + ROW_H * len(used) + 70
    width = LABEL_W + PLOT_W + 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="DejaVu Sans, Arial, sans-serif" font-size="11">',
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" '
           'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
           '<path d="M 0 0 L 10 5 L 0 10 z" fill="#333"/></marker></defs>',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="10" y="22" font-size="15" font-weight="bold">{html.escape(args.title)}</text>']
    y_of = lambda pt: TOP + ROW_H * row[pt]
    last_pid = None
    for pt in used:
        y = y_of(pt)
        if row[pt] % 2 == 0:
            out.append(f'<rect x="0" y="{y}" width="{width}" height="{ROW_H}" fill="#f4f4f4"/>')
        if pt[0] != last_pid:
            out.append(f'<line x1="0" x2="{width}" y1="{y}" y2="{y}" stroke="#999"/>')
            out.append(f'<text x="8" y="{y + 17}" font-weight="bold">'
                       f'{html.escape(procs.get(pt[0], str(pt[0])))}</text>')
            last_pid = pt[0]
        out.append(f'<text x="{LABEL_W - 8}" y="{y + 17}" text-anchor="end">'
                   f'{html.escape(threads.get(pt, str(pt[1])))}</text>')
    bottom = TOP + ROW_H * len(used)
    for a, b in axis.cuts:
        xa = axis.x(a)
        out.append(f'<rect x="{xa:.1f}" y="{TOP}" width="{axis.cut_w:.1f}" '
                   f'height="{bottom - TOP}" fill="white" stroke="#ccc" stroke-dasharray="3,3"/>')
        out.append(f'<text x="{xa + axis.cut_w / 2:.1f}" y="{bottom + 14}" '
                   f'text-anchor="middle" font-size="9" fill="#666">{fmt_us(b - a)}</text>')
    # Where the labels of each row end, on its upper and lower line: a
    # label that would overlap both is left to the tooltip.
    label_end = {}
    for e in sorted(timed, key=lambda e: e["ts"]):
        pt = (e["pid"], e["tid"])
        if pt not in row:
            continue
        y = y_of(pt)
        if e["ph"] == "X":
            xa, xb = axis.x(e["ts"]), axis.x(e["ts"] + e["dur"])
            w = max(xb - xa, 1.5)
            tip = f'{e["name"]} ({fmt_us(e["dur"])})'
            out.append(f'<rect x="{xa:.1f}" y="{y + 4}" width="{w:.1f}" height="{ROW_H - 8}" '
                       f'fill="{color_of(e["name"])}" opacity="0.85"><title>{html.escape(tip)}'
                       f'</title></rect>')
            if w > 7 * len(e["name"]) * 0.8:
                out.append(f'<text x="{xa + 3:.1f}" y="{y + 17}" fill="white">'
                           f'{html.escape(e["name"])}</text>')
        elif e["ph"] == "i":
            x = axis.x(e["ts"])
            c = INSTANT_COLORS.get(e["name"], "#555")
            out.append(f'<path d="M {x:.1f} {y + 4} l 4 7 l -4 7 l -4 -7 z" fill="{c}">'
                       f'<title>{html.escape(e["name"])}</title></path>')
            if not e["name"].startswith("bell"):
                ends = label_end.setdefault(pt, [0.0, 0.0, None, -1e9])
                # A repeat of the label just drawn close by says nothing new.
                if ends[2] == e["name"] and x - ends[3] < 40:
                    continue
                ends[2], ends[3] = e["name"], x
                for line, dy in ((0, 11), (1, 22)):
                    if x + 5 >= ends[line]:
                        out.append(f'<text x="{x + 5:.1f}" y="{y + dy}" font-size="9">'
                                   f'{html.escape(e["name"])}</text>')
                        ends[line] = x + 5 + 5.5 * len(e["name"])
                        break
    # Flow arrows: every start to the finish with its id.
    starts = {e["id"]: e for e in timed if e["ph"] == "s"}
    for f in (e for e in timed if e["ph"] == "f"):
        s = starts.get(f["id"])
        if s is None or (s["pid"], s["tid"]) not in row or (f["pid"], f["tid"]) not in row:
            continue
        x1, y1 = axis.x(s["ts"]), y_of((s["pid"], s["tid"])) + ROW_H / 2
        x2, y2 = axis.x(f["ts"]), y_of((f["pid"], f["tid"])) + ROW_H / 2
        out.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
                   f'stroke="#333" stroke-width="1" marker-end="url(#arrow)"/>')
    # Time ticks: the start and end of every kept stretch.
    edges = [t0] + [t for c in axis.cuts for t in c] + [t1]
    for t in edges:
        x = axis.x(t)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{bottom}" y2="{bottom + 4}" stroke="#333"/>')
    out.append(f'<text x="{LABEL_W}" y="{bottom + 34}" font-size="10" fill="#333">'
               f'time left to right; {len(axis.cuts)} stretches of more than '
               f'{fmt_us(args.gap_us)} without a protocol event cut short (dashed, their '
               f'length below); boxes: spans, diamonds: instant events (unlabelled: '
               f'doorbells), arrows: a request to its serving and back</text>')
    out.append(f'<text x="{LABEL_W}" y="{bottom + 50}" font-size="10" fill="#333">'
               f'window {fmt_us(t1 - t0)} from the first protocol event; hover a box '
               f'for its name and length</text>')
    out.append("</svg>")
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
