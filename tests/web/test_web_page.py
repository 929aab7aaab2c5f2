"""xs web in a real browser (Debian's chromium through Playwright): what a
person sees.  One store and one xs web for the module:

  events  120 entries one second apart (IDs written out), group g that
          read 30 of them (lag 90, 30 pending with alice), group h at $
  live    entries added by the tests while the page is open
  other   one entry, no group
"""
import datetime
import json
import re
import subprocess
import time

import pytest

from conftest import ROOT, XS, run_xs
from tests.web._web import Web, browser, hexkey, needs_browser, open_page  # noqa: F401 (the fixture)

pytestmark = needs_browser

T0 = int(time.time() * 1000) - 3_600_000          # an hour ago: IDs one second apart from there
IDS = ["%d-0" % (T0 + n * 1000) for n in range(120)]


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    d = tmp_path_factory.mktemp("web") / "db"
    lines = ["XADD events %s n %d word w%d" % (i, n, n) for n, i in enumerate(IDS)] + [
        "XGROUP CREATE events g 0", "XREADGROUP GROUP g alice COUNT 30 STREAMS events >",
        "XGROUP CREATE events h $", "XADD live * n 0", "XADD other * k v"]
    p = run_xs(d, lines)
    assert p.returncode == 0, p.stderr
    return d


@pytest.fixture(scope="module")
def web(db):
    w = Web(db, "-i", "0.25")
    yield w
    code, err = w.stop()
    assert code == 0 and "Traceback" not in err, err


def xs(db, *args):
    return subprocess.run(XS + ["--db", str(db)] + list(args), capture_output=True, cwd=ROOT, timeout=60)


def test_the_page_lists_the_streams_and_the_lag_xs_ls_shows(browser, web, db):  # noqa: F811
    from playwright.sync_api import expect
    page = open_page(browser, web)
    try:
        for name in ("events", "live", "other"):
            expect(page.locator('#streams tr[data-stream="%s"]' % name)).to_be_visible()
        ls = {r["stream"]: r for r in json.loads(xs(db, "ls", "--json").stdout)}
        row = page.locator('#groups tr[data-stream="events"][data-group="g"]')
        expect(row.locator("td.lag")).to_have_text(str(ls["events"]["max_lag"]))      # 90
        assert ls["events"]["max_lag"] == 90
        expect(page.locator('#streams tr[data-stream="events"] td.length')).to_have_text(str(ls["events"]["length"]))
        expect(page.locator('#streams tr[data-stream="events"] td.pending')).to_have_text(str(ls["events"]["pending"]))
        expect(page.locator('#groups tr[data-stream="events"][data-group="h"] td.lag')).to_have_text("0")
        expect(row.locator("td.lag-age")).to_have_text(re.compile(r"^(59m|1h)$"))   # the 31st entry's age, as xs top says it
        # a chart per group, drawn once a few samples are in
        expect(row.locator("svg.chart polyline.lag")).to_have_count(1)
    finally:
        page.context.close()


def test_a_new_entry_from_another_process_shows_without_a_reload(browser, web, db):  # noqa: F811
    from playwright.sync_api import expect
    page = open_page(browser, web)
    try:
        page.locator('#streams tr[data-stream="live"] button.stream-link').click()
        expect(page.locator("#tail-lines li")).to_have_count(1)
        length = page.locator('#streams tr[data-stream="live"] td.length')
        expect(length).to_have_text("1")
        page.evaluate("window.__same_page = true")
        p = xs(db, "XADD", "live", "*", "seen", "by-the-page")
        assert p.returncode == 0, p.stderr
        t = time.monotonic()
        expect(length).to_have_text("2", timeout=2000)
        expect(page.locator("#tail-lines li").last).to_contain_text("seen=by-the-page", timeout=2000)
        expect(page.locator("#entries tbody tr").last).to_contain_text("seen=by-the-page", timeout=2000)
        assert time.monotonic() - t < 2.0
        assert page.evaluate("window.__same_page") is True           # no reload happened
    finally:
        page.context.close()


def test_a_click_held_while_the_overview_refreshes_still_opens_the_stream(browser, web):  # noqa: F811
    """A person's click takes a moment, and the overview refreshes under it
    (every 0.25 s here): the rows must stay the same elements, or the press
    lands on one button and the release on its replacement, and the click
    is lost."""
    from playwright.sync_api import expect
    page = open_page(browser, web)
    try:
        page.locator('#streams tr[data-stream="other"] button.stream-link').hover()
        shown = page.locator("#updated").text_content()
        page.mouse.down()
        # held until the overview was drawn again (its time, to the second, changed)
        page.wait_for_function("t => document.querySelector('#updated').textContent !== t", arg=shown)
        page.mouse.up()
        expect(page.locator("#detail-name")).to_have_text("other")
        expect(page.locator("#tail-lines li")).to_have_count(1)
    finally:
        page.context.close()


def _ids(page):
    return page.locator("#entries tbody tr").evaluate_all("rows => rows.map(r => r.dataset.id)")


def test_the_entry_browser_pages_and_jumps_to_an_id_and_a_time(browser, web):  # noqa: F811
    from playwright.sync_api import expect
    page = open_page(browser, web)
    try:
        page.locator('#streams tr[data-stream="events"] button.stream-link').click()
        rows = page.locator("#entries tbody tr")
        expect(rows.first).to_have_attribute("data-id", IDS[70])        # the last page: 50 entries, oldest first
        assert _ids(page) == IDS[70:]
        expect(rows.last).to_contain_text("n=119 word=w119")            # fields as xs tail shows them
        expect(page.locator("#page-later")).to_be_disabled()
        page.locator("#page-earlier").click()
        expect(rows.first).to_have_attribute("data-id", IDS[20])
        assert _ids(page) == IDS[20:70]
        page.locator("#page-earlier").click()
        expect(rows.first).to_have_attribute("data-id", IDS[0])
        assert _ids(page) == IDS[:20]
        expect(page.locator("#page-earlier")).to_be_disabled()
        page.locator("#page-later").click()
        expect(rows.first).to_have_attribute("data-id", IDS[20])
        page.locator("#page-latest").click()
        expect(rows.first).to_have_attribute("data-id", IDS[70])
        page.locator("#page-first").click()
        expect(rows.first).to_have_attribute("data-id", IDS[0])
        # jump to an ID: the page starts there
        page.fill("#jump-id input", IDS[60])
        page.locator("#jump-id button").click()
        expect(rows.first).to_have_attribute("data-id", IDS[60])
        expect(page.locator("#entries tbody tr.hit")).to_have_attribute("data-id", IDS[60])
        # jump to a time: the first entry at or after it
        when = datetime.datetime.fromtimestamp((T0 + 10_500) / 1000, datetime.timezone.utc)
        page.fill("#jump-time input", when.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (when.microsecond // 1000))
        page.locator("#jump-time button").click()
        expect(rows.first).to_have_attribute("data-id", IDS[11])
        expect(rows.first.locator("td.time")).to_have_text(
            datetime.datetime.fromtimestamp((T0 + 11_000) / 1000, datetime.timezone.utc)
            .strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % ((T0 + 11_000) % 1000))
        # a time as ms works too
        page.fill("#jump-time input", str(T0 + 99_000))
        page.locator("#jump-time button").click()
        expect(rows.first).to_have_attribute("data-id", IDS[99])
    finally:
        page.context.close()


def test_groups_consumers_and_pending_entries_with_idle_time_and_deliveries(browser, web):  # noqa: F811
    from playwright.sync_api import expect
    page = open_page(browser, web)
    try:
        page.locator('#streams tr[data-stream="events"] button.stream-link').click()
        card = page.locator('#group-details .group-card[data-group="g"]')
        expect(card.locator('tr[data-consumer="alice"] td.pending')).to_have_text("30")
        pending = card.locator("table.pending tbody tr")
        expect(pending).to_have_count(10)                               # a page of them, then more
        card.locator("button", has_text="More pending").click()
        expect(pending).to_have_count(20)
        card.locator("button", has_text="More pending").click()
        expect(pending).to_have_count(30)
        expect(card.locator("button", has_text="More pending")).to_be_hidden()
        assert pending.evaluate_all("rows => rows.map(r => r.dataset.id)") == IDS[:30]
        expect(pending.first).to_have_attribute("data-id", IDS[0])
        expect(pending.first.locator("td.deliveries")).to_have_text("1")
        assert pending.first.locator("td.idle").inner_text() not in ("", "-")
        expect(page.locator('#group-details .group-card[data-group="h"] table.pending tbody tr')).to_have_count(0)
    finally:
        page.context.close()


def test_a_refresh_of_a_busy_stream_keeps_the_pending_rows_loaded_and_the_same_buttons(browser, web, db):  # noqa: F811
    """A stream that changes redraws its group cards at each refresh: the
    pending rows a person loaded with "More pending" stay, and the cards'
    elements stay the same (a click on them is not lost)."""
    from playwright.sync_api import expect
    lines = ["XADD busy * n %d" % n for n in range(25)] + [
        "XGROUP CREATE busy w 0", "XREADGROUP GROUP w bob COUNT 25 STREAMS busy >"]
    p = run_xs(db, lines)
    assert p.returncode == 0, p.stderr
    page = open_page(browser, web)
    try:
        page.locator('#streams tr[data-stream="busy"] button.stream-link').click()
        card = page.locator('#group-details .group-card[data-group="w"]')
        pending = card.locator("table.pending tbody tr")
        expect(pending).to_have_count(10)
        more = card.locator("button", has_text="More pending")
        more.click()
        expect(pending).to_have_count(20)
        more.evaluate("b => { b.__kept = true; }")
        card.evaluate("c => { c.__kept = true; }")
        # another process changes the stream: the detail is read again
        p = xs(db, "XADD", "busy", "*", "n", "25")
        assert p.returncode == 0, p.stderr
        expect(page.locator('#streams tr[data-stream="busy"] td.length')).to_have_text("26")
        expect(card.locator("h4")).to_contain_text("lag 1")
        expect(pending).to_have_count(20)
        assert more.evaluate("b => b.__kept === true") and card.evaluate("c => c.__kept === true")
        more.click()
        expect(pending).to_have_count(25)
        expect(more).to_be_hidden()
        # another stream: its own cards, a first page again
        page.locator('#streams tr[data-stream="events"] button.stream-link').click()
        expect(page.locator('#group-details .group-card[data-group="g"] table.pending tbody tr')).to_have_count(10)
    finally:
        page.context.close()
