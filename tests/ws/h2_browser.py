#!/usr/bin/python3
"""A browser's WebSocket over HTTP/2: headless Chromium (Debian's, driven over the DevTools
protocol with tests/browser/devtools.py) loads https://HOST:PORT/page of tests/apps/ws_h2_page
(TLS with ALPN h2; the development certificate is accepted with --ignore-certificate-errors)
and prints the JSON its script wrote to document.body.dataset.result.

    /usr/bin/python3 tests/ws/h2_browser.py --url https://127.0.0.1:PORT/page

Judging the result is the caller's (tests/e2e/test_ws_h2h3.rb). Exits 2, saying why, when
Chromium cannot be had or the page wrote nothing within --timeout."""
import argparse
import asyncio
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "browser"))
from devtools import chromium, print_page_result  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--timeout", type=float, default=20)
    opts = ap.parse_args()
    with chromium(opts.chromium, "pp-wsh2-chromium-", 800, 600,
                  ["--ignore-certificate-errors"]) as port:
        asyncio.run(asyncio.wait_for(print_page_result(port, opts.url, opts.timeout),
                                     opts.timeout + 30))


if __name__ == "__main__":
    main()
