#!/usr/bin/env python3
"""Tables for the README and docs/CONTROL.md section 7 from data/ (make-data.sh's output)."""
import glob, os, re, sys

here = os.path.dirname(os.path.abspath(__file__))
data = os.path.join(here, "data")

def sim_rows(path):
    rows, on = {}, False
    for line in open(path):
        if line.startswith("admission"):
            on = True
            continue
        if on and line.startswith(("config", "(")):
            continue
        if on and line.strip():
            f = line.split()
            # config rule budget served shed busy_rps q95 q99 qmax q99/bud ovl_good ovl_p99 std_p99
            rows[f[0]] = dict(served=int(f[-10]), shed=int(f[-9]), q95=f[-7], q99=f[-6],
                              good=f[-3], ovl=f[-2], std=f[-1])
    return rows

print("## pp-sim (seeds 11 / 1 / 2)\n")
for scn in ("overload-cycles", "burst", "burst-fits"):
    per = {s: sim_rows(os.path.join(data, f"sim-{scn}-seed{s}.txt")) for s in (11, 1, 2)}
    print(f"### {scn}\n")
    print("| config | served | shed | queue p95 | queue p99 | overload goodput rps | overload served p99 | after 1st s p99 |")
    print("|---|---|---|---|---|---|---|---|")
    for cfg in per[11]:
        v = [per[s][cfg] for s in (11, 1, 2)]
        j = lambda k: " / ".join(str(x[k]) for x in v)
        print(f"| {cfg} | {j('served')} | {j('shed')} | {j('q95')} | {j('q99')} | {j('good')} | {j('ovl')} | {j('std')} |")
    print()

print("## measured, pp-bench soak (per cycle 1 / 2 / 3)\n")
row = re.compile(r"^(\d) +(steady|overload|recovery) +([\d.]+) +(\d+) +(\d+) +(\d+) +\d+ +\d+ +(\d+) +(\d+) +\d+ +\S+ +(\S+) +(\S+) +(\S+) +(\d+) +(\d+) .* (\S+%|unknown)$")
for f in sorted(glob.glob(os.path.join(data, "soak-*.txt"))):
    name = os.path.basename(f)[5:-4]
    cyc = {}
    verdict = ""
    for line in open(f):
        m = row.match(line.rstrip())
        if m:
            c, ph = m.group(1), m.group(2)
            cyc.setdefault(ph, []).append(dict(req=int(m.group(4)), ok=int(m.group(5)), shed=int(m.group(6)),
                trans=int(m.group(7)), tmo=int(m.group(8)), fail=m.group(9), p99=m.group(10), p99s=m.group(11),
                fds_end=m.group(12), fds_max=m.group(13), steal=m.group(14)))
        if line.startswith("verdict"):
            verdict = line.strip()
    ov = cyc.get("overload", [])
    j = lambda k: " / ".join(str(x[k]) for x in ov)
    sr = cyc.get("steady", []) + cyc.get("recovery", [])
    print(f"- **{name}**: overload requests {j('req')}; 2xx {j('ok')}; 503 {j('shed')}; timeouts {j('tmo')}; "
          f"p99 2xx {j('p99')}; p99 503 {j('p99s')}; steal {j('steal')}; steady+recovery failures "
          f"{sum(int(x['fail']) for x in sr if x['fail'] != '-')}; {verdict}")
