"""Benchmark: xs web's first paint on a big store -- the time from a
browser's navigation to the streams table shown, and to the first page
of a stream's entry browser -- on one stream of 10 million entries (a
group that read 1000 of them, so the lag is ~10 million).

    python3 benchmarks/bench_web.py [--entries 10000000] [--db PATH] [--runs 3]

The store is built with the engine's bulk add (Txn.add_auto_many, 100k
entries a transaction, no fsync), or reused when --db names one that
exists.  Each run is a fresh browser context (Debian's chromium, driven
by Playwright): the token's redirect and cookie included.  Goal: 1 s for
both on 10 million entries.
"""
import argparse
import os
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
XS = [sys.executable, "-m", "xstream_cli"]


def build(db, n):
    from storage.store import Store
    s = Store(db, durable=False)
    fields = [b"user", b"u1234", b"action", b"login", b"payload", b"x" * 40]
    done = 0
    while done < n:
        k = min(100000, n - done)
        s.run(lambda tx: tx.add_auto_many([(b"events", fields)] * k), write=True)
        done += k
    s.close()
    for line in ("XGROUP CREATE events g 0", "XREADGROUP GROUP g c1 COUNT 1000 STREAMS events >"):
        subprocess.run(XS + ["--db", db, "--no-sync"] + line.split(), check=True, stdout=subprocess.DEVNULL,
                       cwd=ROOT)


def start_web(db):
    p = subprocess.Popen(XS + ["--db", db, "web"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    t = time.monotonic()
    ready, _, _ = select.select([p.stdout], [], [], 120)
    line = p.stdout.readline().decode().strip() if ready else ""
    if not re.match(r"http://\S+\?token=\S+$", line):
        p.kill()
        raise SystemExit("xs web did not start: %r %s" % (line, p.stderr.read().decode()))
    return p, line, time.monotonic() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=10_000_000)
    ap.add_argument("--db", help="a store to use (built there when it does not exist)")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    tmp = None
    db = a.db
    if db is None:
        tmp = tempfile.mkdtemp(prefix="xs-bench-web-")
        db = os.path.join(tmp, "store")
    if not os.path.exists(os.path.join(db, "data.mdb")):
        t = time.monotonic()
        build(db, a.entries)
        print("built %d entries in %.1f s" % (a.entries, time.monotonic() - t))
    length = subprocess.run(XS + ["--db", db, "XLEN", "events"], capture_output=True, cwd=ROOT).stdout.strip()
    proc = None
    try:
        proc, url, started = start_web(db)
        from playwright.sync_api import sync_playwright
        chromium = shutil.which("chromium") or "/usr/bin/chromium"
        table, page_nav, page_click, mark_table, mark_entries = [], [], [], [], []

        def marked(page, name):
            return page.evaluate("performance.getEntriesByName(%r)[0].startTime" % name) / 1000.0
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
            try:
                for _ in range(a.runs):
                    ctx = browser.new_context()
                    page = ctx.new_page()
                    page.set_default_timeout(60000)
                    t = time.monotonic()
                    page.goto(url)
                    page.wait_for_selector('#streams tr[data-stream="events"]', state="visible")
                    table.append(time.monotonic() - t)
                    mark_table.append(marked(page, "xs:streams"))
                    t = time.monotonic()
                    page.locator('#streams tr[data-stream="events"] button.stream-link').click()
                    page.wait_for_selector("#entries tbody tr:nth-child(50)", state="visible")
                    page_click.append(time.monotonic() - t)
                    ctx.close()
                    ctx = browser.new_context()          # straight to the stream: its first page from navigation
                    page = ctx.new_page()
                    page.set_default_timeout(60000)
                    t = time.monotonic()
                    page.goto(url.replace("/?", "/?") + "#s=" + b"events".hex())
                    page.wait_for_selector("#entries tbody tr:nth-child(50)", state="visible")
                    page_nav.append(time.monotonic() - t)
                    mark_entries.append(marked(page, "xs:entries"))
                    ctx.close()
            finally:
                browser.close()
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print("xs web on a stream of %s entries (median of %d runs, fresh browser context each)"
          % (length.decode(), a.runs))
    print("  %-52s %8.3f s" % ("xs web start (store open, first overview) to URL", started))
    print("  %-52s %8.3f s" % ("navigation -> streams table shown", statistics.median(table)))
    print("  %-52s %8.3f s" % ("click on the stream -> first page of entries shown", statistics.median(page_click)))
    print("  %-52s %8.3f s" % ("navigation -> first page of entries shown", statistics.median(page_nav)))
    print("  the page's own clock (performance.mark, from navigation start; no driver round trips):")
    print("  %-52s %8.3f s" % ("  streams table rendered", statistics.median(mark_table)))
    print("  %-52s %8.3f s" % ("  first page of entries rendered (stream in the URL)", statistics.median(mark_entries)))
    print("  goal: 1 s for each")


if __name__ == "__main__":
    main()
