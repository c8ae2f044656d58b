"""``dynaunique ui`` over plain HTTP: the access token, the Host check, CSRF, read-only mode,
the embedded server — the guards a browser test cannot forge its way around."""

from __future__ import annotations

import re
import time
from typing import Any
from urllib.parse import urlencode

import support.audit_models as fm
from ui_server import UIServer, running_ui

import dynaunique._write.mrsc as mrsc
from dynaunique import audit
from dynaunique._lock.locks import lock_key, secret_id
from dynaunique.ui import _views as views

Account = fm.AuditAccount
PHONE = "+15550042"


def plant_orphan(raw: Any) -> None:
    """ACCT#GONE's record deleted around the library: its EMAIL lock is left an orphan."""
    Account(pk="ACCT#GONE", email="gone@x.io").save()
    raw.delete_item(TableName=fm.TABLE, Key=fm.account_key("ACCT#GONE"))


def run_check(server: UIServer) -> str:
    """POST /check as the page's form does; the report page's path."""
    sent = server.fetch("/check", method="POST", data={"csrf": server.csrf()})
    assert sent.status == 303, sent.body
    return sent.headers["location"]


def test_the_banner_prints_a_local_url_with_a_token(read_only: UIServer) -> None:
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", read_only.base)
    assert len(read_only.token) >= 40
    assert "  read-only (--allow-repair enables repairs)" in read_only.printed


def test_a_request_without_the_token_gets_403(read_only: UIServer, raw: Any) -> None:
    for path in ("/", "/models", "/locks", "/check", "/style.css", "/nope"):
        refused = read_only.fetch(path, token=False)
        assert refused.status == 403, path
        assert "missing or wrong access token" in refused.body
    wrong = read_only.fetch("/models", token=False, headers={"Authorization": "token nope"})
    assert wrong.status == 403
    assert read_only.fetch("/models?token=nope", token=False).status == 403
    assert read_only.fetch("/models").status == 200


def test_the_token_in_the_url_moves_into_a_strict_cookie(read_only: UIServer, raw: Any) -> None:
    first = read_only.fetch(f"/locks?constraint=EMAIL&token={read_only.token}", token=False)
    assert first.status == 303
    assert first.headers["location"] == "/locks?constraint=EMAIL"
    cookie = first.headers["set-cookie"]
    name = f"dynaunique_ui_{read_only.base.rsplit(':', 1)[1]}"
    assert cookie.startswith(f"{name}={read_only.token};")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    again = read_only.fetch("/locks?constraint=EMAIL", token=False,
                            headers={"Cookie": f"{name}={read_only.token}"})
    assert again.status == 200


def test_a_foreign_host_header_is_refused_even_with_the_token(read_only: UIServer) -> None:
    rebound = read_only.fetch("/models", headers={"Host": "attacker.example:8737"})
    assert rebound.status == 403
    assert "only on 127.0.0.1 or localhost" in rebound.body


def test_every_page_sends_security_headers(read_only: UIServer, raw: Any) -> None:
    page = read_only.fetch("/models")
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    # same-origin, not no-referrer: a browser sends a page's own POST with its real Origin
    # (under no-referrer it sends "Origin: null", which the forms refuse), and another site
    # gets no Referer.
    assert (page.headers["referrer-policy"], page.headers["x-frame-options"]) == (
        "same-origin", "DENY")


def test_read_only_offers_no_repair_and_refuses_a_forged_repair_post(
        read_only: UIServer, raw: Any) -> None:
    plant_orphan(raw)
    report = read_only.fetch(run_check(read_only))
    assert "orphan lock" in report.body and "gone@x.io" in report.body
    assert "Repair…" not in report.body and "/repair/" not in report.body
    run_id = read_only.fetch("/check").body.split('href="/check/')[1].split('"')[0]
    csrf = read_only.csrf()
    for path in (f"/repair/{run_id}/all", f"/repair/{run_id}/0"):
        forged = read_only.fetch(path, method="POST", data={"csrf": csrf})
        assert forged.status == 403, path
        assert "repairs are disabled" in forged.body
        assert read_only.fetch(path).status == 403  # nor the confirmation page
    # The orphan is still there: nothing was written.
    assert audit.read_lock(fm.MODELS, "UNIQ#EMAIL#gone@x.io") is not None


def test_a_repair_post_without_the_csrf_token_is_refused(repairing: UIServer, raw: Any) -> None:
    plant_orphan(raw)
    report = repairing.fetch(run_check(repairing))
    assert "Repair…" in report.body
    run_id = repairing.fetch("/check").body.split('href="/check/')[1].split('"')[0]
    assert repairing.fetch(f"/repair/{run_id}/0", method="POST", data={}).status == 403
    wrong = repairing.fetch(f"/repair/{run_id}/0", method="POST", data={"csrf": "guess"})
    assert (wrong.status, "CSRF" in wrong.body) == (403, True)
    other_site = repairing.fetch(f"/repair/{run_id}/0", method="POST",
                                 data={"csrf": repairing.csrf()},
                                 headers={"Origin": "http://attacker.example"})
    assert other_site.status == 403
    # An opaque origin (a sandboxed frame, a data: URL) is not a local one.
    for origin in ("null", "http://localhost.attacker.example", "file://127.0.0.1",
                   "http://127.0.0.1.nip.io:80"):
        opaque = repairing.fetch(f"/repair/{run_id}/0", method="POST",
                                 data={"csrf": repairing.csrf()}, headers={"Origin": origin})
        assert opaque.status == 403, origin
    assert audit.read_lock(fm.MODELS, "UNIQ#EMAIL#gone@x.io") is not None
    done = repairing.fetch(f"/repair/{run_id}/0", method="POST", data={"csrf": repairing.csrf()},
                           headers={"Origin": repairing.base})
    assert done.status == 200 and ">fixed<" in done.body
    assert audit.read_lock(fm.MODELS, "UNIQ#EMAIL#gone@x.io") is None


def test_a_hashed_lookup_redirects_to_the_digest_and_never_echoes_the_value(
        read_only: UIServer, raw: Any) -> None:
    Account(pk="ACCT#1", email="a@x.io", phone=PHONE).save()
    csrf = read_only.csrf()
    found = read_only.fetch("/lookup", method="POST",
                            data={"csrf": csrf, "constraint": "PHONE", "value": PHONE})
    assert found.status == 303
    lock = audit.who_holds(Account, "phone", PHONE)
    assert lock is not None and lock.hashed
    assert found.headers["location"] == "/lock?" + urlencode({"table": lock.table,
                                                             "key": lock.key})
    shown = read_only.fetch(found.headers["location"])
    assert "ACCT#1 / PROFILE" in shown.body
    free = read_only.fetch("/lookup", method="POST",
                           data={"csrf": csrf, "constraint": "PHONE", "value": "+19999"})
    assert "that PHONE value (hashed, not shown) is free" in free.body
    prefix = read_only.fetch("/locks?constraint=PHONE&prefix=%2B1555")
    assert prefix.status == 400 and "is hashed" in prefix.body
    record = read_only.fetch("/record?table=audit_accounts&key="
                             + views.key_param(fm.account_key("ACCT#1")))
    assert "a@x.io" in record.body and "hidden: a hashed constraint protects it" in record.body
    for body in (found.body, shown.body, free.body, prefix.body, record.body):
        assert PHONE not in body and "+19999" not in body and "15550042" not in body


def test_without_an_endpoint_it_starts_an_embedded_server_and_seeds_nothing() -> None:
    with running_ui(real=True) as server:
        assert any("(embedded, empty)" in line for line in server.printed)
        counted = server.fetch("/models?count=1")
        assert counted.status == 200
        assert re.findall(r'<td class="count">(\d+)</td>', counted.body) == ["0"] * 5
        listing = server.fetch("/locks")
        assert "no lock on this page" in listing.body and "end of the listing" in listing.body
        assert "No findings" in server.fetch(run_check(server)).body


def test_a_check_page_lists_every_kind_with_its_repair_or_what_a_person_must_do(
        read_only: UIServer, raw: Any) -> None:
    fm.seed_drift(raw)
    page = read_only.fetch(run_check(read_only)).body
    rows = re.findall(r'<tr class="finding (\w+)">(.*?)</tr>', page, re.S)
    kinds = [kind for kind, _ in rows]
    assert kinds == ["duplicate", "missing", "missing", "missing", "foreign_owner", "orphan",
                     "orphan", "unknown_constraint"]
    cells = dict(zip(kinds, (body for _, body in rows), strict=False))
    assert "hand over from ACCT#OLDOWNER / PROFILE to ACCT#NEWOWNER / PROFILE" in \
        cells["foreign_owner"]
    assert "left for a person:" in cells["duplicate"]
    assert "decide which record keeps the value" in cells["duplicate"]
    assert "--drop-unknown OLDNAME" in cells["unknown_constraint"]
    # Six planned fixes, each with its exact request; two findings left for a person.
    assert page.count("<summary>exact request</summary>") == 6
    assert page.count("left for a person:") == 2
    assert "8 finding(s)" in page
    # ACCT#MOVED's orphan fix checks that its record is unchanged, its hashed phone included.
    assert "+1555000" not in page and "«hidden: hashed»" in cells["orphan"]


def test_a_repair_is_refused_while_the_check_found_locks_another_secret_made(
        repairing: UIServer, raw: Any) -> None:
    """A hashed lock made with another secret is never deleted as an orphan, and the page's
    repair refuses as ``dynaunique repair --yes`` does: nothing is sent, the orphan included."""
    plant_orphan(raw)
    stray = lock_key("PHONE", ("+15550077",), secret=b"another-secret")
    raw.put_item(TableName=fm.TABLE, Item={
        **fm.lock_pk(stray), "owner": {"M": fm.account_key("ACCT#NOBODY")},
        "model": {"S": "AuditAccount"}, "constraint": {"S": "PHONE"},
        "secret_id": {"S": secret_id(b"another-secret")}, "created": {"S": "2026-01-01"}})
    report = repairing.fetch(run_check(repairing)).body
    rows = re.findall(r'<tr class="finding (\w+)">(.*?)</tr>', report, re.S)
    assert [kind for kind, _ in rows] == ["orphan", "foreign_secret"]
    assert "check the lock secret" in rows[1][1]
    run_id = repairing.fetch("/check").body.split('href="/check/')[1].split('"')[0]
    refused = repairing.fetch(f"/repair/{run_id}/all", method="POST",
                              data={"csrf": repairing.csrf()})
    assert refused.status == 400 and "refusing to repair" in refused.body
    assert audit.read_lock(fm.MODELS, stray) is not None
    assert audit.read_lock(fm.MODELS, "UNIQ#EMAIL#gone@x.io") is not None


def as_intent(raw: Any, lock: str, token: str, at: float) -> None:
    """The lock item ``lock`` rewritten as the MRSC protocol's step 2 leaves it: a pending intent
    (``mrsc.intent_put``'s item: the library's lock + token, pending mark, writer's time)."""
    item = raw.get_item(TableName=fm.TABLE, Key=fm.lock_pk(lock), ConsistentRead=True)["Item"]
    raw.put_item(TableName=fm.TABLE, Item=mrsc.intent_put(fm.TABLE, item, token, at, None)["Item"])


def test_a_check_page_lists_writes_in_flight_and_confirmable_intents_with_their_meaning(
        read_only: UIServer, raw: Any) -> None:
    """Pending intents (an MRSC table's writes in flight) make a report ``clean``, but the page
    lists them rather than saying "No findings"; a confirmable one has its planned fix."""
    fm.AuditTeam(pk="TEAM#NEW", team_name="Blue").save()
    raw.delete_item(TableName=fm.TABLE, Key={"PK": {"S": "TEAM#NEW"}, "SK": {"S": "TEAM"}})
    as_intent(raw, "UNIQ#TEAM_NAME#blue", "T-NEW", time.time())   # its record not written yet
    first = read_only.fetch(run_check(read_only)).body
    assert "No findings" not in first
    rows = re.findall(r'<tr class="finding (\w+)">(.*?)</tr>', first, re.S)
    assert [kind for kind, _ in rows] == ["pending"]
    assert '<span class="ok" id="summary">1 write(s) in flight</span>' in first
    assert "1 pending intent; nothing else: locks and records agree." in first
    assert '<span class="tag">pending intent</span>' in rows[0][1]   # not marked bad
    assert "left alone:</span> nothing: a write in flight" in rows[0][1]
    assert re.search(r"a write in flight \(\d s of a 30 s grace period\)", rows[0][1])
    assert "<strong>pending intent</strong>: a write in flight on a multi-Region" in first
    assert "confirmable intent</strong>" not in first
    assert "clean; 1 write(s) in flight" in read_only.fetch("/check").body
    blue = read_only.fetch("/lock?" + urlencode({"table": fm.TABLE,
                                                 "key": "UNIQ#TEAM_NAME#blue"})).body
    assert "within its grace period. A write in flight" in blue
    assert "TEAM#NEW / TEAM does not exist yet: its write is in flight." in blue
    assert "looks like an orphan" not in blue

    fm.AuditTeam(pk="TEAM#RED", team_name="Red").save()
    as_intent(raw, "UNIQ#TEAM_NAME#red", "T-RED", time.time() - 100)   # written, mark left
    second = read_only.fetch(run_check(read_only)).body
    rows = re.findall(r'<tr class="finding (\w+)">(.*?)</tr>', second, re.S)
    assert [kind for kind, _ in rows] == ["pending", "confirmable"]
    assert '<span class="bad" id="summary">2 finding(s)</span>' in second
    assert "1 pending intent, 1 confirmable intent" in second
    assert ("clear the pending mark, if TEAM#RED / TEAM still holds the value and the lock "
            "still carries token T-RED") in rows[1][1]
    assert "&#34;UpdateItem&#34;" in rows[1][1] and "REMOVE #n1" in rows[1][1]
    assert second.count("<summary>exact request</summary>") == 1
    assert "<strong>confirmable intent</strong>: a pending intent whose record holds" in second
    # The lock and record pages call it a pending intent, not a held lock.
    lock = read_only.fetch("/lock?" + urlencode({"table": fm.TABLE,
                                                 "key": "UNIQ#TEAM_NAME#red"})).body
    assert ('<p class="warn" id="intent">A pending intent (MRSC), not a held lock: token '
            "<code>T-RED</code>") in lock and "past its grace period" in lock
    team = read_only.fetch("/record?" + urlencode({"table": fm.TABLE, "key": views.key_param(
        {"PK": {"S": "TEAM#RED"}, "SK": {"S": "TEAM"}})})).body
    assert '<span class="warn">pending intent</span>' in team and ">held<" not in team
