"""Helpers of the xs web tests: start ``xs web`` on a free loopback port
(it prints its URL on stdout), stop it, and a real browser (Debian's
chromium driven by Playwright; never a browser Playwright downloads).
Tests that need the browser are skipped, saying why, when chromium or
playwright is missing."""
import os
import re
import select
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import ROOT, XS

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)


def have_aiohttp():
    import importlib.util
    return importlib.util.find_spec("aiohttp") is not None


needs_aiohttp = pytest.mark.skipif(not have_aiohttp(), reason="aiohttp is needed (pip install '.[web]')")


def browser_problem():
    import importlib.util
    if importlib.util.find_spec("playwright") is None:
        return "playwright is needed (pip install playwright; the test extra has it)"
    if CHROMIUM is None:
        return "Debian's chromium is needed (apt-get install chromium)"
    if not have_aiohttp():
        return "aiohttp is needed (pip install '.[web]')"
    return None


needs_browser = pytest.mark.skipif(browser_problem() is not None, reason=browser_problem() or "")


class Web:
    """A running ``xs web``: ``url`` (with the token), ``base``, ``token``."""

    def __init__(self, db, *args, env=None, timeout=30):
        self.proc = subprocess.Popen(XS + ["--db", str(db), "web"] + list(args), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, cwd=ROOT, env=env)
        line = self._line(timeout)
        m = re.match(r"(https?://[^/]+)/\?token=(\S+)$", line.strip())
        if not m:
            self.proc.kill()
            out, err = self.proc.communicate(timeout=30)
            raise AssertionError("xs web printed %r; stderr: %s" % (line, err.decode(errors="replace")))
        self.url = line.strip()
        self.base, self.token = m.group(1), m.group(2)

    def _line(self, timeout):
        fd = self.proc.stdout
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                return fd.readline().decode()
            if self.proc.poll() is not None:
                return ""
        return ""

    def get(self, path, token=True, headers=None, method="GET", data=None):
        """(status, body bytes) of a request (the token as ?token= unless
        ``token`` is False, or the given text)."""
        url = self.base + path
        if token:
            url += ("&" if "?" in url else "?") + "token=" + (self.token if token is True else token)
        req = urllib.request.Request(url, headers=headers or {}, method=method, data=data)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def stop(self, sig=signal.SIGTERM):
        """Send ``sig``; (exit status, stderr text)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        err = self.proc.stderr.read().decode(errors="replace")
        self.proc.stdout.close()
        self.proc.stderr.close()
        return self.proc.returncode, err


def hexkey(name):
    return (name.encode() if isinstance(name, str) else name).hex()


@pytest.fixture(scope="module")
def browser():
    problem = browser_problem()
    if problem:
        pytest.skip(problem)
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            yield b
        finally:
            b.close()


def open_page(browser, web, viewport=None):
    """A fresh page (its own cookies) on ``web``'s URL, the overview shown."""
    ctx = browser.new_context(viewport=viewport or {"width": 1400, "height": 1000})
    page = ctx.new_page()
    page.set_default_timeout(10000)
    page.goto(web.url)
    page.wait_for_selector("#status.live")
    return page
