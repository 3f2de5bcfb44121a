#!/usr/bin/python3
"""Loads a page in headless Chromium (Debian's chromium, over the DevTools protocol with
python3-websockets: tests/browser/devtools.py) and prints what the page wrote to
document.body.dataset.result, a JSON object, on one line.

    /usr/bin/python3 tests/browser/ws_page_probe.py --url http://127.0.0.1:PORT/page?ws=/ws

The page (tests/apps/ws_page/page.html) opens a WebSocket back to its server and records the
exchange; judging it is the caller's business (tests/e2e/test_ws_browser.rb). Exits 2, saying
why, when Chromium or the page cannot be had or the page wrote no result within --timeout."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from devtools import page_probe_main  # noqa: E402

if __name__ == "__main__":
    page_probe_main(__doc__.split("\n\n")[0], "pp-ws-chromium-")
