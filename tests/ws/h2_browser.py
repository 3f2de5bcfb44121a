#!/usr/bin/python3
"""A browser's WebSocket over HTTP/2: headless Chromium (Debian's, driven over the DevTools
protocol with tests/browser/devtools.py) loads https://HOST:PORT/page of tests/apps/ws_h2_page
(TLS with ALPN h2; the development certificate is accepted with --ignore-certificate-errors)
and prints the JSON its script wrote to document.body.dataset.result.

    /usr/bin/python3 tests/ws/h2_browser.py --url https://127.0.0.1:PORT/page

Judging the result is the caller's (tests/e2e/test_ws_h2h3.rb). Exits 2, saying why, when
Chromium cannot be had or the page wrote nothing within --timeout."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "browser"))
from devtools import page_probe_main  # noqa: E402

if __name__ == "__main__":
    page_probe_main(__doc__.split("\n\n")[0], "pp-wsh2-chromium-", ["--ignore-certificate-errors"])
