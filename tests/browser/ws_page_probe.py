#!/usr/bin/python3
"""Loads a page in headless Chromium (Debian's chromium, over the DevTools protocol with
python3-websockets: tests/browser/devtools.py) and prints what the page wrote to
document.body.dataset.result, a JSON object, on one line.

    /usr/bin/python3 tests/browser/ws_page_probe.py --url http://127.0.0.1:PORT/page?ws=/ws

The page (tests/apps/ws_page/page.html) opens a WebSocket back to its server and records the
exchange; judging it is the caller's business (tests/e2e/test_ws_browser.rb). Exits 2, saying
why, when Chromium or the page cannot be had or the page wrote no result within --timeout."""
import argparse
import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from devtools import chromium, print_page_result  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--timeout", type=float, default=20)
    opts = ap.parse_args()
    with chromium(opts.chromium, "pp-ws-chromium-", 800, 600) as port:
        asyncio.run(asyncio.wait_for(print_page_result(port, opts.url, opts.timeout),
                                     opts.timeout + 30))


if __name__ == "__main__":
    main()
