"""Headless Chromium (Debian's chromium) driven over the DevTools protocol with
python3-websockets, no other browser tooling: what the browser probes share
(tests/browser/dashboard_probe.py, tests/browser/ws_page_probe.py, tests/ws/h2_browser.py).

    with chromium(opts.chromium, "pp-dash-chromium-", 1280, 1100) as port:
        asyncio.run(run(port))            # run: async with page_at(port, url) as page: ...

Every failure to get the browser or the page ends the program with exit status 2 and a line on
stderr naming the program and why (fail)."""
import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

PROG = os.path.splitext(os.path.basename(sys.argv[0]))[0]

try:
    import websockets
except ImportError:
    sys.exit(f"{PROG}: python3-websockets is missing (Debian package python3-websockets)")


def fail(msg):
    print(f"{PROG}: {msg}", file=sys.stderr)
    sys.exit(2)


class Page:
    """One DevTools session on one page target: numbered commands, events ignored."""

    def __init__(self, ws):
        self.ws = ws
        self.next_id = 0

    async def call(self, method, **params):
        self.next_id += 1
        my_id = self.next_id
        await self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        while True:
            msg = json.loads(await asyncio.wait_for(self.ws.recv(), 30))
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    async def evaluate(self, expr):
        r = await self.call("Runtime.evaluate", expression=expr, returnByValue=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"page script failed: {r['exceptionDetails']}")
        return r["result"].get("value")

    async def wait_for(self, expr, timeout, what):
        """Polls expr every 50 ms until it is truthy and returns its value; after timeout
        seconds, fails saying the page showed no `what` and what it holds."""
        deadline = time.monotonic() + timeout
        while True:
            value = await self.evaluate(expr)
            if value:
                return value
            if time.monotonic() > deadline:
                text = await self.evaluate("document.documentElement.outerHTML.slice(0, 2000)")
                fail(f"the page showed no {what} within {timeout} s; it holds:\n{text}")
            await asyncio.sleep(0.05)


def launch(chromium, profile, width, height, extra_args=()):
    """Starts chromium headless on an empty page with its profile in `profile` (a fresh folder,
    which also takes its log) in a session of its own, and returns (process, DevTools port)."""
    args = [chromium, "--headless", "--no-sandbox", "--disable-gpu",
            "--disable-background-networking", "--no-first-run", "--no-default-browser-check",
            "--no-proxy-server", "--disable-extensions", "--hide-scrollbars",
            f"--user-data-dir={profile}", "--remote-debugging-port=0",
            "--remote-debugging-address=127.0.0.1", f"--window-size={width},{height}",
            *extra_args, "about:blank"]
    log = open(os.path.join(profile, "chromium.log"), "wb")
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                            start_new_session=True)
    port_file = os.path.join(profile, "DevToolsActivePort")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            fail(f"chromium exited with {proc.returncode} before DevTools was up")
        if os.path.exists(port_file):
            lines = open(port_file).read().split()
            if len(lines) >= 2:
                return proc, int(lines[0])
        time.sleep(0.05)
    fail("chromium did not open its DevTools port within 30 s")


@contextlib.contextmanager
def chromium(program, prefix, width, height, extra_args=()):
    """Chromium (program) running headless for the block, on a temporary profile named after
    prefix; yields its DevTools port. Afterwards chromium and its children (its process group)
    are stopped and the profile removed."""
    if not os.access(program, os.X_OK):
        fail(f"{program} not found: install Debian's chromium (scripts/install-deps.sh)")
    profile = tempfile.mkdtemp(prefix=prefix)
    proc = None
    try:
        proc, port = launch(program, profile, width, height, extra_args)
        yield port
    finally:
        if proc and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # chromium's own children share its group
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


def page_ws_url(port):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
            for t in json.load(r):
                if t.get("type") == "page":
                    return t["webSocketDebuggerUrl"]
        time.sleep(0.05)
    fail("no page target in chromium")


@contextlib.asynccontextmanager
async def page_at(port, url):
    """The page target of the chromium on DevTools port `port`, navigated to url (the load is
    not awaited), as a Page for the block."""
    async with websockets.connect(page_ws_url(port), max_size=64 << 20) as ws:
        page = Page(ws)
        await page.call("Page.enable")
        await page.call("Runtime.enable")
        await page.call("Page.navigate", url=url)
        yield page


RESULT_JS = "document.body ? (document.body.dataset.result || null) : null"


async def print_page_result(port, url, timeout):
    """Loads url and prints, on one line, what its script wrote to document.body.dataset.result
    (the page probes' shared job); fails if nothing came within timeout seconds."""
    async with page_at(port, url) as page:
        print(await page.wait_for(RESULT_JS, timeout, "result"), flush=True)


def page_probe_main(description, profile_prefix, extra_args=()):
    """The whole of a page probe (ws_page_probe.py, h2_browser.py): --url, --chromium and
    --timeout from the command line, the page loaded in chromium (extra_args added to its
    command line) and its result printed (print_page_result)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--url", required=True)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--timeout", type=float, default=20)
    opts = ap.parse_args()
    with chromium(opts.chromium, profile_prefix, 800, 600, extra_args) as port:
        asyncio.run(asyncio.wait_for(print_page_result(port, opts.url, opts.timeout),
                                     opts.timeout + 30))
