#!/usr/bin/python3
"""Loads a page in headless Chromium (Debian's chromium, over the DevTools protocol with
python3-websockets, as tests/browser/dashboard_probe.py does) and prints what the page wrote
to document.body.dataset.result, a JSON object, on one line.

    /usr/bin/python3 tests/browser/ws_page_probe.py --url http://127.0.0.1:PORT/page?ws=/ws

The page (tests/apps/ws_page/page.html) opens a WebSocket back to its server and records the
exchange; judging it is the caller's business (tests/e2e/test_ws_browser.rb). Exits 2, saying
why, when Chromium or the page cannot be had or the page wrote no result within --timeout."""
import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dashboard_probe import Page, fail, launch, page_ws_url, websockets  # noqa: E402


async def probe(opts, port):
    async with websockets.connect(page_ws_url(port), max_size=64 << 20) as ws:
        page = Page(ws)
        await page.call("Page.enable")
        await page.call("Runtime.enable")
        await page.call("Page.navigate", url=opts.url)
        deadline = time.monotonic() + opts.timeout
        while True:
            r = await page.evaluate("document.body ? (document.body.dataset.result || null) : null")
            if r:
                print(r, flush=True)
                return
            if time.monotonic() > deadline:
                text = await page.evaluate("document.documentElement.outerHTML.slice(0, 2000)")
                fail(f"the page wrote no result within {opts.timeout} s; it holds:\n{text}")
            await asyncio.sleep(0.05)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--timeout", type=float, default=20)
    opts = ap.parse_args()
    if not os.access(opts.chromium, os.X_OK):
        fail(f"{opts.chromium} not found: install Debian's chromium (scripts/install-deps.sh)")
    profile = tempfile.mkdtemp(prefix="pp-ws-chromium-")
    proc = None
    try:
        proc, port = launch(opts.chromium, profile, 800, 600)
        asyncio.run(asyncio.wait_for(probe(opts, port), opts.timeout + 30))
    finally:
        if proc and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # chromium's own children share its group
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    main()
