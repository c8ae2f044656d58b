"""``dynaunique ui`` driven in headless Chromium (Playwright, the system's /usr/bin/chromium).

Each test saves a screenshot of the pages it visits when run with DYNAUNIQUE_UPDATE_SCREENSHOTS=1
(into docs/_static/ui/, shown in docs/operating-locks.md) or DYNAUNIQUE_SCREENSHOTS=DIR (an
ordinary run takes none), and every response body the browser receives is kept and checked:
the plain value of a hashed constraint appears in none of them.

Without Chromium (or Playwright) these tests skip — except in CI (``CI=true``), which installs
Chromium in .ci/run, so there a missing browser fails.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote_plus

import pytest
import support.audit_models as fm
from ui_server import SHOTS, UIServer

from dynaunique import audit

# Drives another program (tests/README.md, "Two runs"): CI's second pytest step.
pytestmark = pytest.mark.external

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
Account = fm.AuditAccount
#: Plain values of the hashed PHONE constraint: never in any page or response.
PHONES = ("+15550001", "+15550009")


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI installs it (.ci/run), so this is a failure here, not a skip")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install -e '.[dev]')")
    if not CHROMIUM.exists():
        _unavailable(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


class Session:
    """One browser context on one ui server: every response kept, screenshots on request."""

    def __init__(self, browser: Any, server: UIServer) -> None:
        self.server = server
        self.context = browser.new_context(viewport={"width": 1360, "height": 900})
        self.page = self.context.new_page()
        self.page.set_default_timeout(60_000)
        self.responses: list[Any] = []
        self.page.on("response", lambda response: self.responses.append(response))
        self.bodies: list[str] = []
        # The URL the command printed: the token moves into a cookie, then /models.
        self.page.goto(server.url)
        assert self.page.url == server.base + "/models"

    def follow(self, selector: str) -> None:
        """Click what ``selector`` finds and wait until the page it leads to has loaded."""
        with self.page.expect_navigation():
            self.page.click(selector)

    def run_check(self) -> None:
        """Open the Check page and run a check: the browser lands on its report."""
        self.follow("header nav >> text=Check")
        self.follow("#run")

    def goto(self, path: str) -> Any:
        return self.page.goto(self.server.base + path)

    def shot(self, name: str) -> None:
        if SHOTS is None:  # an ordinary run (ui_server.SHOTS)
            return
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)

    def collect(self) -> list[str]:
        """The bodies of every response so far (redirects have none)."""
        for response in self.responses:
            try:
                self.bodies.append(response.body().decode("utf-8", "replace"))
            except Exception:  # a redirect: its body is gone once it was followed
                self.bodies.append("")
        self.responses.clear()
        return self.bodies

    def assert_no_hashed_value(self) -> None:
        bodies = self.collect()
        assert bodies
        for body in bodies:
            for phone in PHONES:
                assert phone not in body and phone[1:] not in body

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.assert_no_hashed_value()
        finally:
            self.context.close()


def healthy() -> None:
    Account(pk="ACCT#OK", email="ok@x.io", username="okay", phone=PHONES[0], tenant="t1",
            slug="home").save()
    fm.AuditTeam(pk="TEAM#RED", team_name="Red").save()


def plant_drift(raw: Any) -> None:
    """Healthy records, then one orphan lock and two missing locks (one of them hashed)."""
    healthy()
    Account(pk="ACCT#GONE", email="gone@x.io").save()
    raw.delete_item(TableName=fm.TABLE, Key=fm.account_key("ACCT#GONE"))  # orphan EMAIL
    Account(pk="ACCT#NOLOCK", email="nolock@x.io", username="nolock").save()
    raw.delete_item(TableName=fm.TABLE, Key=fm.lock_pk("UNIQ#HANDLE#nolock"))  # missing HANDLE
    Account(pk="ACCT#SECRET", email="secret@x.io", phone=PHONES[1]).save()
    phone_lock = audit.who_holds(Account, "phone", PHONES[1])
    assert phone_lock is not None
    raw.delete_item(TableName=fm.TABLE, Key=fm.lock_pk(phone_lock.key))  # missing PHONE


def findings(page: Any) -> list[tuple[str, str, str]]:
    """(kind, constraint, value) of every row of the findings table."""
    rows = page.locator("#findings tr.finding")
    return [tuple(rows.nth(i).locator("td").nth(c).inner_text().strip() for c in range(3))
            for i in range(rows.count())]


def test_search_a_value_see_its_holder_and_follow_the_owner_link(
        browser: Any, read_only: UIServer, raw: Any) -> None:
    healthy()
    with Session(browser, read_only) as session:
        session.follow("#count")
        assert session.page.locator("#cost").inner_text().startswith("counted with scan of")
        counts = session.page.locator("#constraints-audit_accounts td.count").all_inner_texts()
        assert counts == ["1", "1", "1", "1", "1"]
        session.shot("models")

        session.follow("header nav >> text=Locks")
        session.page.select_option("#filter select[name=constraint]", "EMAIL")
        session.follow("#filter button")
        session.page.fill("#lookup input[name=value]", "  OK@X.IO".strip())
        session.follow("#lookup button")
        # Normalized as the constraint normalizes (casefold): the lock of ok@x.io.
        assert session.page.locator("h1").inner_text() == "Lock UNIQ#EMAIL#ok@x.io"
        assert session.page.locator("#owner-link").inner_text() == "ACCT#OK / PROFILE"
        session.shot("lock")

        session.follow("#owner-link")
        assert session.page.locator("h1").inner_text() == "Record ACCT#OK / PROFILE"
        expected = session.page.locator("#expected tr").all_inner_texts()
        assert any(row.startswith("EMAIL\tok@x.io\theld") for row in expected), expected
        assert any(row.startswith("PHONE\thashed\theld") for row in expected), expected
        session.shot("record")

        # A hashed constraint: the value is hashed like a save, looked up, never shown.
        session.goto("/locks?constraint=PHONE")
        session.page.fill("#lookup input[name=value]", PHONES[0])
        session.follow("#lookup button")
        assert session.page.locator("#owner-link").inner_text() == "ACCT#OK / PROFILE"
        assert session.page.locator("h1").inner_text().startswith("Lock UNIQ#PHONE#\\k")
        session.follow("#owner-link")
        assert "hidden: a hashed constraint protects it" in session.page.content()


def test_the_lock_browser_pages_through_the_table(
        browser: Any, read_only: UIServer, raw: Any) -> None:
    for i in range(8):
        Account(pk=f"ACCT#{i}", email=f"user{i}@x.io", username=f"user{i}").save()
    healthy()
    every = sorted(lock.key for lock in audit.list_locks(fm.MODELS).locks)
    with Session(browser, read_only) as session:
        session.goto("/locks?limit=25")
        session.shot("locks")
        session.goto("/locks?limit=5")
        seen: list[str] = []
        pages = 0
        while True:
            pages += 1
            links = session.page.locator("#locks td:nth-child(2) a")
            seen.extend(re.sub(r"^/lock\?table=audit_accounts&key=", "", href)
                        for href in (links.nth(i).get_attribute("href") or ""
                                     for i in range(links.count())))
            assert links.count() <= 5
            if session.page.locator("#next").count() == 0:
                break
            session.follow("#next")
        assert sorted(unquote_plus(key) for key in seen) == every
        assert pages == -(-len(every) // 5)


def test_a_check_shows_a_planted_orphan_and_missing_locks_read_only(
        browser: Any, read_only: UIServer, raw: Any) -> None:
    plant_drift(raw)
    with Session(browser, read_only) as session:
        session.run_check()
        assert findings(session.page) == [
            ("missing lock", "HANDLE", "nolock"),
            ("missing lock", "PHONE", "hashed"),
            ("orphan lock", "EMAIL", "gone@x.io"),
        ]
        plans = session.page.locator("#findings .plan").all_inner_texts()
        assert plans == [
            "write for ACCT#NOLOCK / PROFILE, if no lock exists and ACCT#NOLOCK / PROFILE is "
            "unchanged",
            "write for ACCT#SECRET / PROFILE, if no lock exists and ACCT#SECRET / PROFILE is "
            "unchanged",
            "delete, if still owned by ACCT#GONE / PROFILE and ACCT#GONE / PROFILE still does "
            "not exist",
        ]
        # The exact request: the PHONE fix's ConditionCheck compares the record's phone, which
        # the page shows hidden.
        requests = session.page.locator("#findings pre").all_text_contents()
        assert '"Delete"' in requests[2] and "UNIQ#EMAIL#gone@x.io" in requests[2]
        assert "«hidden: hashed»" in requests[1]
        # Read-only: no repair control at all, and a forged POST is refused.
        assert session.page.locator("text=Repair…").count() == 0
        assert session.page.locator("#read-only").count() == 1
        session.page.locator("tr.missing summary").nth(1).click()  # the PHONE fix's request
        session.shot("check")
        run_id = session.page.url.rsplit("/", 1)[1]
        # Even with the session's cookie and a valid CSRF token: refused.
        forged = session.page.request.post(f"{read_only.base}/repair/{run_id}/all",
                                           form={"csrf": read_only.csrf()})
        assert forged.status == 403
        assert "repairs are disabled" in forged.text()
        session.run_check()
        assert len(findings(session.page)) == 3  # nothing was repaired


def test_with_allow_repair_repairs_then_the_check_comes_back_clean(
        browser: Any, repairing: UIServer, raw: Any) -> None:
    plant_drift(raw)
    with Session(browser, repairing) as session:
        session.run_check()
        assert len(findings(session.page)) == 3
        # One fix, through its confirmation page.
        session.follow("tr.orphan .repair-one")
        assert session.page.locator("h1").inner_text() == "Confirm 1 repair(s)"
        session.shot("confirm")
        session.follow("#confirm-repair")
        assert session.page.locator("#outcomes td").first.inner_text() == "fixed"
        assert audit.read_lock(fm.MODELS, "UNIQ#EMAIL#gone@x.io") is None
        session.follow("#run")
        assert findings(session.page) == [("missing lock", "HANDLE", "nolock"),
                                          ("missing lock", "PHONE", "hashed")]
        # The rest at once, again behind a confirmation.
        session.follow("#repair-all")
        assert session.page.locator("h1").inner_text() == "Confirm 2 repair(s)"
        session.follow("#confirm-repair")
        assert session.page.locator("#outcomes tr td:first-child").all_inner_texts() == [
            "fixed", "fixed"]
        session.shot("repaired")
        session.follow("#run")
        assert session.page.locator("#clean").inner_text() == (
            "No findings: locks and records agree.")
        session.shot("clean")
    assert audit.check(fm.MODELS).clean


def test_a_browser_without_the_token_gets_403(browser: Any, read_only: UIServer) -> None:
    context = browser.new_context()
    try:
        page = context.new_page()
        response = page.goto(read_only.base + "/models")
        assert response is not None and response.status == 403
        assert "missing or wrong access token" in page.content()
    finally:
        context.close()
