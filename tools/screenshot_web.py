"""Screenshots of xs web for docs/monitoring.md: a demo store (orders with
a group behind and a consumer, dead letters from xs worker, a quiet
stream), xs web on it, and Debian's chromium driven by Playwright.

    python3 tools/screenshot_web.py [--out docs/img]

Writes web-overview.png (streams, groups and their charts) and
web-stream.png (one stream: its entries, groups, pending entries, dead
letters, live tail).  tests/web/test_web_docs.py runs it into a
temporary directory, so it keeps working."""
import argparse
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
XS = [sys.executable, "-m", "xstream_cli"]


def xs(db, *args, stdin=None):
    p = subprocess.run(XS + ["--db", db, "--no-sync"] + list(args), input=stdin, capture_output=True, cwd=ROOT,
                       timeout=120)
    if p.returncode not in (0, 1):
        raise SystemExit("xs %s: %s" % (" ".join(args), p.stderr.decode()))
    return p


def demo_store(db):
    now = int(time.time() * 1000)
    lines = []
    for n in range(400):
        lines.append("XADD orders %d-0 order %d customer c%d total %d.%02d" % (now - 600_000 + n * 1400, 1000 + n,
                                                                               n % 37, 10 + n % 90, n % 100))
    lines += ["XGROUP CREATE orders billing 0", "XREADGROUP GROUP billing alice COUNT 300 STREAMS orders >",
              "XREADGROUP GROUP billing bob COUNT 40 STREAMS orders >", "XGROUP CREATE orders audit $",
              'XADD "sensor readings" * temp 21.5 unit "°C"', "XADD jobs * file cat.png", "XADD jobs * file dog.png"]
    xs(db, stdin=("\n".join(lines) + "\n").encode())
    xs(db, "XACK", "orders", "billing", *["%d-0" % (now - 600_000 + n * 1400) for n in range(250)])
    xs(db, "worker", "jobs", "-g", "resize", "-c", "w1", "--once", "-q", "--max-deliveries", "1",
       "--dead-letter", "jobs:dead", "--", "false")


def start_web(db):
    p = subprocess.Popen(XS + ["--db", db, "web", "-i", "0.5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         cwd=ROOT)
    ready, _, _ = select.select([p.stdout], [], [], 30)
    line = p.stdout.readline().decode().strip() if ready else ""
    if not re.match(r"https?://\S+\?token=\S+$", line):
        p.kill()
        raise SystemExit("xs web did not start: %r %s" % (line, p.stderr.read().decode()))
    return p, line


def shoot(url, db, out):
    from playwright.sync_api import expect, sync_playwright
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 620})
            page.set_default_timeout(15000)
            page.goto(url)
            page.wait_for_selector("#status.live")
            for n in range(6):           # a few chart samples, with entries coming in
                xs(db, "XADD", "orders", "*", "order", str(2000 + n), "customer", "c1", "total", "9.99")
                page.wait_for_timeout(500)
            expect(page.locator('#groups tr[data-group="billing"] svg.chart polyline.lag')).to_have_count(1)
            page.screenshot(path=os.path.join(out, "web-overview.png"))
            page.set_viewport_size({"width": 1280, "height": 900})
            page.locator('#streams tr[data-stream="jobs:dead"] button.stream-link').click()
            expect(page.locator("#dead tbody tr")).to_have_count(2)
            page.locator('#streams tr[data-stream="orders"] button.stream-link').click()
            expect(page.locator('#group-details .group-card[data-group="billing"]')).to_be_visible()
            xs(db, "XADD", "orders", "*", "order", "3000", "customer", "c7", "total", "42.00")
            expect(page.locator("#tail-lines li").last).to_contain_text("order=3000")
            page.locator("#detail").scroll_into_view_if_needed()
            page.screenshot(path=os.path.join(out, "web-stream.png"), full_page=True, clip={"x": 0, "y": page.locator(
                "#detail").bounding_box()["y"], "width": 1280, "height": 1400})
        finally:
            browser.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "img"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="xs-web-shots-")
    db = os.path.join(tmp, "shop.xs")
    proc = None
    try:
        demo_store(db)
        proc, url = start_web(db)
        shoot(url, db, a.out)
        print("wrote %s and %s" % (os.path.join(a.out, "web-overview.png"), os.path.join(a.out, "web-stream.png")))
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(20)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
