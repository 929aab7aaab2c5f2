"""The re-drive button of xs web: it asks first; cancelled, nothing
changes; confirmed, it does what ``xs redrive`` does (checked against
xs redrive on a copy of the same store).  And the POST it makes cannot
be made by another site: it needs the page's CSRF value as well as the
token."""
import json
import shutil
import subprocess

import pytest

from conftest import ROOT, XS, run_xs
from tests.web._web import Web, browser, hexkey, needs_browser, open_page  # noqa: F401 (the fixture)

pytestmark = needs_browser


def xs(db, *args):
    return subprocess.run(XS + ["--db", str(db)] + list(args), capture_output=True, cwd=ROOT, timeout=60)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """(the store xs web serves, an identical copy for xs redrive)."""
    base = tmp_path_factory.mktemp("redrive")
    d = base / "db"
    p = run_xs(d, ["XADD jobs 1-1 file a.png", "XADD jobs 1-2 file b.png", "XADD other 1-1 k v"])
    assert p.returncode == 0, p.stderr
    p = xs(d, "worker", "jobs", "-g", "w", "-c", "w1", "--once", "--max-deliveries", "1",
           "--dead-letter", "jobs:dead", "-q", "--", "false")
    assert b"Traceback" not in p.stderr
    assert xs(d, "XLEN", "jobs:dead").stdout.strip() == b"2"
    copy = base / "copy"
    shutil.copytree(d, copy)
    return d, copy


@pytest.fixture(scope="module")
def web(stores):
    w = Web(stores[0])
    yield w
    code, err = w.stop()
    assert code == 0 and "Traceback" not in err, err


def test_a_post_without_the_pages_csrf_value_is_refused(web, stores):
    body = json.dumps({"stream": hexkey("jobs:dead")}).encode()
    for headers in ({"Content-Type": "application/json"},
                    {"Content-Type": "application/json", "X-XS-CSRF": "made.up"}):
        code, text = web.get("/api/redrive", method="POST", data=body, headers=headers)
        assert code == 403, text
    code, _ = web.get("/api/redrive", token=False, method="POST", data=body,
                      headers={"Content-Type": "application/json", "X-XS-CSRF": "x.y"})
    assert code == 403
    assert xs(stores[0], "XLEN", "jobs:dead").stdout.strip() == b"2"


def test_cancelling_the_dialog_changes_nothing_and_confirming_redrives_as_xs_redrive(browser, web, stores):  # noqa: F811
    from playwright.sync_api import expect
    db, copy = stores
    page = open_page(browser, web)
    posts = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    try:
        page.locator('#streams tr[data-stream="jobs:dead"] button.stream-link').click()
        expect(page.locator("#dead")).to_be_visible()
        expect(page.locator("#dead tbody tr")).to_have_count(2)
        expect(page.locator("#dead tbody tr").first).to_contain_text("file=a.png")
        button = page.locator("#redrive-all")
        expect(button).to_have_text("Re-drive all 2 dead letters")

        asked = []

        def dismiss(d):
            asked.append(d.message)
            d.dismiss()
        page.once("dialog", dismiss)
        button.click()
        assert asked and "Re-drive 2 dead letters of jobs:dead" in asked[0]
        assert posts == []
        expect(page.locator("#dead-result")).to_be_hidden()
        assert xs(db, "XLEN", "jobs:dead").stdout.strip() == b"2"
        assert xs(db, "XLEN", "jobs").stdout.strip() == b"2"

        page.once("dialog", lambda d: d.accept())
        button.click()
        expect(page.locator("#dead-result")).to_have_text("redrove 2 dead letters from jobs:dead")
        assert len(posts) == 1 and posts[0].endswith("/api/redrive")
        expect(page.locator('#streams tr[data-stream="jobs:dead"] td.length')).to_have_text("0")
        expect(page.locator('#streams tr[data-stream="jobs"] td.length')).to_have_text("4")
    finally:
        page.context.close()
    p = xs(copy, "redrive", "jobs:dead")
    assert p.returncode == 0, p.stderr

    def fields(store, key):
        return [e[1] for e in json.loads(xs(store, "--json", "XRANGE", key, "-", "+").stdout)]
    for key in ("jobs", "jobs:dead", "other"):
        assert fields(db, key) == fields(copy, key), key
    assert fields(db, "jobs")[2:] == [["file", "a.png"], ["file", "b.png"]]


def test_a_refresh_keeps_the_dead_letters_loaded_and_the_button_counts_the_new_ones(browser, tmp_path):  # noqa: F811
    """Dead letters arriving while the page is open redraw the list: the
    ones a person loaded with "More" stay, and the re-drive button (the
    same element) asks about the new total."""
    from playwright.sync_api import expect
    d = tmp_path / "db"
    p = run_xs(d, ["XADD q * n %d" % n for n in range(55)])
    assert p.returncode == 0, p.stderr

    def fail_all():
        p = xs(d, "worker", "q", "-g", "w", "-c", "w1", "--once", "--max-deliveries", "1",
               "--dead-letter", "q:dead", "-q", "--", "false")
        assert b"Traceback" not in p.stderr
    fail_all()
    assert xs(d, "XLEN", "q:dead").stdout.strip() == b"55"
    w = Web(d, "-i", "0.25")
    try:
        page = open_page(browser, w)
        page.locator('#streams tr[data-stream="q:dead"] button.stream-link').click()
        rows = page.locator("#dead tbody tr")
        expect(rows).to_have_count(50)
        page.locator("#dead-more").click()
        expect(rows).to_have_count(55)
        button = page.locator("#redrive-all")
        expect(button).to_have_text("Re-drive all 55 dead letters")
        button.evaluate("b => { b.__kept = true; }")
        assert xs(d, "XADD", "q", "*", "n", "55").returncode == 0
        fail_all()
        expect(button).to_have_text("Re-drive all 56 dead letters")
        expect(rows).to_have_count(55)
        expect(page.locator("#dead-more")).to_be_visible()
        assert button.evaluate("b => b.__kept === true")
        asked = []
        page.once("dialog", lambda dlg: (asked.append(dlg.message), dlg.dismiss()))
        button.click()
        expect(page.locator("#dead-result")).to_be_hidden()
        assert asked and "Re-drive 56 dead letters of q:dead" in asked[0]
        page.context.close()
    finally:
        code, err = w.stop()
    assert code == 0 and "Traceback" not in err, err
