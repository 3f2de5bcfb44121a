#!/usr/bin/env python3
"""Medians over seeds of pp-sim's summary rows, per scenario and config, with p99 and memory
as ratios of the scenario's peak-provisioned static config (its second row, the first for the
step scenarios). Reads the sim-SCENARIO-sSEED.txt files make-data.sh writes."""
import re
import statistics
import sys
from collections import defaultdict

UNITS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
MEM = {"B": 1e-6, "KB": 1e-3, "MB": 1.0, "GB": 1e3}


def dur_ms(text):
    m = re.fullmatch(r"([0-9.]+)(ns|us|ms|s)", text)
    return float(m.group(1)) * UNITS[m.group(2)]


def mem_mb(text):
    m = re.fullmatch(r"([0-9.]+)(B|KB|MB|GB)", text)
    return float(m.group(1)) * MEM[m.group(2)]


rows = defaultdict(lambda: defaultdict(list))  # scenario -> config -> [(p99, mem, w, ok)]
order = defaultdict(list)
for path in sys.argv[1:]:
    scn = re.match(r".*sim-(.+)-s\d+\.txt$", path).group(1)
    header = False
    for line in open(path):
        f = line.split()
        if f[:2] == ["config", "offered"]:
            header = True
            continue
        if not f or f[0].startswith("("):
            header = False
            continue
        if not header:
            continue
        cfg = f[0]
        if cfg not in order[scn]:
            order[scn].append(cfg)
        rows[scn][cfg].append((dur_ms(f[4]), mem_mb(f[11]), float(f[9]), float(f[2]) / float(f[1])))

print("| scenario | config | p99 (median of 3 seeds) | p99 / peak static | avg workers | avg mem (PSS) | mem / peak static | served / offered |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for scn in sorted(rows):
    cfgs = order[scn]
    peak = next(c for c in cfgs if "peak" in c or re.match(r"static-w\d+t(?!5$)", c))
    p_peak = statistics.median(r[0] for r in rows[scn][peak])
    m_peak = statistics.median(r[1] for r in rows[scn][peak])
    for c in cfgs:
        rs = rows[scn][c]
        p = statistics.median(r[0] for r in rs)
        m = statistics.median(r[1] for r in rs)
        w = statistics.median(r[2] for r in rs)
        ok = min(r[3] for r in rs)
        ps = f"{p / 1000:.2f} s" if p >= 1000 else f"{p:.1f} ms"
        print(f"| {scn} | {c} | {ps} | {p / p_peak:.2f} | {w:.2f} | {m:.0f} MB | {m / m_peak:.2f} | {ok:.3f} |")
