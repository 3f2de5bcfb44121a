#!/usr/bin/python3
"""A browser's WebSocket over HTTP/2: headless Chromium (Debian's, driven over the DevTools
protocol with the helpers of tests/browser/dashboard_probe.py) loads https://HOST:PORT/page of
tests/apps/ws_h2_page (TLS with ALPN h2; the development certificate is accepted with
--ignore-certificate-errors) and prints the JSON its script wrote to document.body.dataset.result.

    /usr/bin/python3 tests/ws/h2_browser.py --url https://127.0.0.1:PORT/page

Judging the result is the caller's (tests/e2e/test_ws_h2h3.rb). Exits 2, saying why, when
Chromium cannot be had or the page wrote nothing within --timeout."""
import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "browser"))
from dashboard_probe import Page, fail, launch, page_ws_url, websockets  # noqa: E402


async def probe(url, port, timeout):
    async with websockets.connect(page_ws_url(port), max_size=64 << 20) as ws:
        page = Page(ws)
        await page.call("Page.enable")
        await page.call("Runtime.enable")
        await page.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        while True:
            r = await page.evaluate("document.body ? (document.body.dataset.result || null) : null")
            if r:
                print(r, flush=True)
                return
            if time.monotonic() > deadline:
                fail(f"the page wrote no result within {timeout} s")
            await asyncio.sleep(0.05)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--timeout", type=float, default=20)
    opts = ap.parse_args()
    if not os.access(opts.chromium, os.X_OK):
        fail(f"{opts.chromium} not found: install Debian's chromium (scripts/install-deps.sh)")
    profile = tempfile.mkdtemp(prefix="pp-wsh2-chromium-")
    # launch() takes a program: this one adds the flag that accepts the development certificate
    wrapper = os.path.join(profile, "chromium")
    with open(wrapper, "w") as f:
        f.write('#!/bin/sh\nexec "%s" --ignore-certificate-errors "$@"\n' % opts.chromium)
    os.chmod(wrapper, 0o755)
    proc = None
    try:
        os.makedirs(os.path.join(profile, "p"))
        proc, port = launch(wrapper, os.path.join(profile, "p"), 800, 600)
        asyncio.run(asyncio.wait_for(probe(opts.url, port, opts.timeout), opts.timeout + 30))
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
