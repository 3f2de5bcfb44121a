"""Per-phase medians over the measured rounds of results.db, as sim/tests/fixtures/validate-conc.txt.

Per phase and run, the same figures `pp-bench report -vs-sim` prints: rps is the mean of the
per-second completions, p50 the mean of the per-second p50s, over the seconds [start, end) of
the phase. Then the median over the rounds (the measured runs of each scenario).
    python3 fixture.py results.db scenarios/
"""
import re
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path


def phases(path):
    edges, t = [], 0.0
    for m in re.finditer(r"duration:\s*([0-9.]+)s", Path(path).read_text()):
        edges.append((t, t + float(m.group(1))))
        t += float(m.group(1))
    return edges


def main():
    db, scen_dir = sys.argv[1], Path(sys.argv[2])
    con = sqlite3.connect(db)
    root = scen_dir.parent
    commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    print("# Issue 24's simulator validation: the real server's per-phase figures, measured by")
    print("# notebooks/sim-vs-real-conc/measure.sh (pp-bench run scenarios/validate-conc-*.yaml")
    print("# -warmup 1ms -conns 1500, mix app, 1 worker x 5 threads autoscale).")
    print(f"# Written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at commit {commit}; "
          "medians over the rounds (per-round values in the comment after each line).")
    print("# `background SCENARIO B`: machine.background for pp-sim, the median over the runs of the")
    print("# other work measured before and after each run (measure.sh's probe; their mean per run).")
    print("# `overhead MS`: machine.overhead for pp-sim, the worker's CPU per request outside the app")
    print("# (overhead.sh: /mix/0/0 on one worker, utime + stime per request).")
    print("# scenario config phase start_s end_s rps p50_ms")
    ov_file = Path(db).parent / "overhead.txt"
    if ov_file.exists():
        print(ov_file.read_text().strip())
    bg = {}
    bg_file = Path(db).parent / "background.txt"
    if bg_file.exists():
        for line in bg_file.read_text().split("\n"):
            f = line.split()
            if len(f) == 4:  # scenario round before after
                bg.setdefault(f[0], []).append((float(f[2]) + float(f[3])) / 2)
    for scen in ("io", "mixed", "cpu"):
        name = f"validate-conc-{scen}"
        runs = [r for (r,) in con.execute(
            "SELECT run_id FROM runs WHERE kind='measured' AND scenario=? ORDER BY run_id", (name,))]
        if not runs:
            continue
        if name in bg:
            rounds = " ".join(f"{b:.2f}" for b in bg[name])
            print(f"background {name} {statistics.median(bg[name]):.2f}  # {rounds}")
        for cfg in [c for (c,) in con.execute(
                "SELECT DISTINCT name FROM configs WHERE run_id=? ORDER BY config_id", (runs[0],))]:
            for k, (lo, hi) in enumerate(phases(scen_dir / f"{name}.yaml")):
                rps, p50 = [], []
                for run in runs:
                    a, b = con.execute(
                        "SELECT avg(t.rps), avg(t.p50_ms) FROM timeline t JOIN configs c USING"
                        " (config_id) WHERE c.run_id=? AND c.name=? AND t.t_s>=? AND t.t_s<?",
                        (run, cfg, lo, hi)).fetchone()
                    rps.append(a)
                    p50.append(b)
                rounds = " ".join(f"{a:.1f}/{b:.1f}" for a, b in zip(rps, p50))
                print(f"{name} {cfg} {k + 1} {lo:g} {hi:g} {statistics.median(rps):.1f} "
                      f"{statistics.median(p50):.1f}  # {rounds}")


main()
