#!/usr/bin/python3
"""Reads the live dashboard the way a person sees it: headless Chromium (Debian's chromium)
driven over the DevTools protocol (python3-websockets: tests/browser/devtools.py), no other
browser tooling.

    /usr/bin/python3 tests/browser/dashboard_probe.py --url http://127.0.0.1:PORT/dashboard \
        --stats-url http://127.0.0.1:PORT/stats --samples 4 --interval 1.5 \
        --screenshot build/artifacts/dashboard.png

Loads the page, waits until it shows a tick, and prints at once what its charts hold:
{"first": {"tick": the tick shown, "history_from": the oldest tick charted, "history": [[tick,
queue p95 ms, arrivals/s], ...] oldest first, "p95_points": points of the p95 line drawn}}
(the charts' history, drawn on load from the stream's `history` event). Then it takes --samples
readings --interval seconds apart, polling /stats every 40 ms in between. A reading is the text of the page's value
elements and its decisions table, then /stats fetched right after; when /stats is already on
another tick (stream.ticks) than the page shows, the pair is taken again, up to 8 times. Prints
one JSON object a line: {"dom": {...}, "stats": {...}, "prev": the latest /stats fetched during
an earlier tick (or null), "tries": n}, then {"screenshot": PATH, "bytes": n}. Judging the
values is the caller's business (tests/e2e/test_dashboard.rb). Exits 2, saying why, when
Chromium or the page cannot be had."""
import argparse
import asyncio
import base64
import json
import os
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from devtools import chromium, page_at  # noqa: E402

IDS = ["status", "tick", "window", "q-p50", "q-p95", "q-p99", "q-depth", "q-pred", "rate-in",
       "rate-out", "w-ready", "w-booting", "w-old", "w-retiring", "w-wanted", "shed", "shed-rate", "timeouts",
       "timeouts-rate", "shedding", "last-reason"]

READ_JS = """(() => {
  const out = {};
  for (const id of %s) out[id] = document.getElementById(id).textContent;
  out.decisions = [...document.querySelectorAll('#decisions tr')]
    .map(tr => [...tr.children].map(td => td.textContent));
  out.body_tick = document.body.dataset.tick || null;
  return JSON.stringify(out);
})()""" % json.dumps(IDS)


FIRST_JS = """(() => JSON.stringify({
  tick: document.body.dataset.tick || null,
  history_from: document.body.dataset.historyFrom || null,
  history: window.ppDashboard.history.map(h => [h.id, h.p95, h.rin]),
  p95_points: (document.querySelectorAll('#chart-queue polyline')[1]
    .getAttribute('points') || '').trim().split(/\\s+/).filter(Boolean).length
}))()"""


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)


async def probe(opts, port):
    async with page_at(port, opts.url) as page:
        await page.wait_for("!!(document.body && document.body.dataset.tick)", opts.timeout,
                            "tick")
        print(json.dumps({"first": json.loads(await page.evaluate(FIRST_JS))}), flush=True)
        snapshots = {}  # every /stats fetched, by stream.ticks (the latest few)

        def fetch():
            s = get_json(opts.stats_url)
            snapshots[s["stream"]["ticks"]] = s
            for old in sorted(snapshots)[:-8]:
                del snapshots[old]
            return s

        async def poll(secs):
            end = time.monotonic() + secs
            while time.monotonic() < end:
                fetch()
                await asyncio.sleep(0.04)

        for i in range(opts.samples):
            await poll(opts.interval)
            for tries in range(1, 9):
                dom = json.loads(await page.evaluate(READ_JS))
                stats = fetch()
                if str(stats["stream"]["ticks"]) == dom["tick"]:
                    break
                await asyncio.sleep(0.03)
            earlier = [k for k in snapshots if k < stats["stream"]["ticks"]]
            prev = snapshots[max(earlier)] if earlier else None
            print(json.dumps({"dom": dom, "stats": stats, "prev": prev, "tries": tries}), flush=True)
        shot = await page.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        data = base64.b64decode(shot["data"])
        os.makedirs(os.path.dirname(os.path.abspath(opts.screenshot)), exist_ok=True)
        with open(opts.screenshot, "wb") as f:
            f.write(data)
        print(json.dumps({"screenshot": opts.screenshot, "bytes": len(data)}), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--stats-url", required=True)
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--screenshot", required=True)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("--size", default="1280x1100")
    opts = ap.parse_args()
    width, height = (int(v) for v in opts.size.split("x"))
    with chromium(opts.chromium, "pp-dash-chromium-", width, height) as port:
        asyncio.run(asyncio.wait_for(probe(opts, port), opts.timeout + opts.samples *
                                     (opts.interval + 5) + 30))


if __name__ == "__main__":
    main()
