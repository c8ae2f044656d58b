"""The demo's scenario: the story of docs/why.md told with real requests, returned as reports.

``dynaunique demo`` (``dynaunique.cli.demo``) only prints what this module measures. The story:
ada signs up (the TransactWriteItems request captured on the wire, compared with
``save(dry_run=True)``), a second signup with her email in other case fails naming her, N
threads race to sign up with one email through dynaunique and through the naive
read-then-put pattern on the same server, ada changes her email (the old one is free again and
another account takes it), ada is deleted (no lock left), and the lock items are listed.

Every number a report holds is measured; nothing is hard-coded. Both demo tables get fresh
names and are deleted at the end, so the demo can point at any DynamoDB, real AWS included.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import re
import threading
import urllib.parse
import uuid
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, cast

import attrs
import boto3
import botocore.config
import botocore.exceptions
import botocore.session
from pynamodb.exceptions import PynamoDBException

from dynaunique import normalizers, transaction
from dynaunique.attributes import UnicodeAttribute
from dynaunique.connection import client_for
from dynaunique.constraints import UniqueConstraint
from dynaunique.errors import ConfigurationError, DynauniqueError, UniqueViolation
from dynaunique.locks import CREATED_ATTR, OWNER_ATTR, RESERVED_PREFIX, untyped
from dynaunique.model import Model
from dynaunique.unit_of_work import locks_of

#: How many threads race per round, and how many rounds, unless told otherwise.
DEFAULT_RACERS = 12
DEFAULT_ROUNDS = 3

#: Fake credentials for the embedded server (moto accepts any); real ones never go there.
_LOCAL_CREDENTIALS = ("testing", "testing")
_AWS_ENDPOINT = re.compile(r"^https://dynamodb(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/?$")

ADA_KEY = "ACCT#a1f9c3"
ADA_EMAIL = "ada@lovelace.io"
ADA_NEW_EMAIL = "ada@analytical.engine"
#: The second signup: ada's email in other case, from another account.
IMPOSTOR_KEY = "ACCT#7c2d10"
IMPOSTOR_EMAIL = "ADA@Lovelace.IO"
#: The account that takes ada's old email once she has changed it.
GRACE_KEY = "ACCT#9b2e71"


class DemoUnavailableError(ConfigurationError):
    """The demo cannot run where it was asked to: no embedded server, no credentials, or the
    DynamoDB there failed (unreachable, access denied)."""


# --- where the demo runs -------------------------------------------------------------------------


@attrs.frozen
class Target:
    """The DynamoDB the demo talks to."""

    #: The endpoint URL.
    endpoint: str
    region: str
    #: Whether this is the embedded local server the demo started itself.
    embedded: bool
    #: Explicit (key id, secret) or None for the usual AWS credential chain.
    credentials: tuple[str, str] | None = None

    @property
    def description(self) -> str:
        """One line naming the target."""
        if self.embedded:
            return f"the embedded local server at {self.endpoint} (moto, requests serialized)"
        return f"{self.endpoint} (region {self.region})"


def region_for(endpoint: str | None) -> str:
    """The region to sign requests for: the one in an AWS endpoint URL, else the environment's.

    ``https://dynamodb.eu-west-1.amazonaws.com`` → ``eu-west-1``; anything else falls back to the
    usual AWS configuration (``AWS_REGION``/``AWS_DEFAULT_REGION``/profile), then ``us-east-1``.
    """
    if endpoint is not None:
        match = _AWS_ENDPOINT.match(endpoint)
        if match:
            return match.group(1)
    configured = botocore.session.get_session().get_config_variable("region")
    return str(configured) if configured else "us-east-1"


def is_loopback(endpoint: str) -> bool:
    """Whether ``endpoint`` is on this machine (``http://127.0.0.1:8000``, ``localhost``…)."""
    host = urllib.parse.urlsplit(endpoint).hostname or ""
    return host in ("localhost", "::1") or host.startswith("127.")


def moto_available() -> bool:
    """Whether the embedded server's dependencies (the ``[local]`` extra) are installed."""
    return importlib.util.find_spec("moto") is not None


# --- the demo's models (one class per run: the table name is part of a model's plan) -------------

if TYPE_CHECKING:

    class DemoAccount(Model):
        """What the type checker knows of the class :func:`account_model` builds."""

        pk: str
        sk: str
        email: str
        username: str
        tenant: str
        slug: str


def account_model(table: str, target: Target) -> type[DemoAccount]:
    """The README's ``Account``, bound to ``table`` on ``target``."""

    class Account(Model):
        class Meta:
            table_name = table
            host = target.endpoint
            region = target.region
            aws_access_key_id = target.credentials[0] if target.credentials else None
            aws_secret_access_key = target.credentials[1] if target.credentials else None
            constraints = [UniqueConstraint(fields=("tenant", "slug"), name="TENANT_SLUG")]

        pk = UnicodeAttribute(hash_key=True, attr_name="PK")
        sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
        email = UnicodeAttribute(unique=True, normalize=normalizers.casefold)
        username = UnicodeAttribute(unique=True, lock_name="HANDLE")
        tenant = UnicodeAttribute()
        slug = UnicodeAttribute()

    return cast("type[DemoAccount]", Account)


# --- what went over the wire ---------------------------------------------------------------------


@attrs.frozen
class Sent:
    """One HTTP request to DynamoDB, as its body went over the wire."""

    operation: str
    body: dict[str, Any]

    @property
    def json(self) -> str:
        """The body as indented JSON."""
        return transaction.to_json(self.body)


class WireRecorder:
    """Records the requests a botocore client sends, from botocore's ``before-send`` event.

    The handler sees the serialized HTTP request, so what it records is exactly what DynamoDB
    received (one entry per attempt, resends included).
    """

    def __init__(self, client: Any) -> None:
        self._client = client
        self._id = f"dynaunique-demo-{uuid.uuid4().hex}"
        self._lock = threading.Lock()
        self._active: list[list[Sent]] = []

    def __enter__(self) -> WireRecorder:
        self._client.meta.events.register("before-send.dynamodb", self._on_send,
                                          unique_id=self._id)
        return self

    def __exit__(self, *exc: object) -> None:
        self._client.meta.events.unregister("before-send.dynamodb", unique_id=self._id)

    def _on_send(self, request: Any, **kwargs: Any) -> None:
        with self._lock:
            if not self._active:
                return
            target = request.headers.get("X-Amz-Target", b"")
            if isinstance(target, bytes):
                target = target.decode("ascii")
            body = request.body
            if isinstance(body, bytes):
                body = body.decode("utf-8")
            sent = Sent(str(target).rpartition(".")[2], json.loads(body or "{}"))
            for window in self._active:
                window.append(sent)

    @contextlib.contextmanager
    def capture(self) -> Iterator[list[Sent]]:
        """Collect every request sent while the block runs."""
        window: list[Sent] = []
        with self._lock:
            self._active.append(window)
        try:
            yield window
        finally:
            with self._lock:
                self._active.remove(window)


def comparable(request: Mapping[str, Any]) -> Any:
    """``request`` without what legitimately differs between a dry run and the real send.

    That is the per-call ``ClientRequestToken`` and the lock items' ``created`` time (taken when
    the write is planned). Everything else must be identical.
    """
    body = json.loads(transaction.to_json(request))
    body.pop("ClientRequestToken", None)
    body.pop("Operation", None)
    for entry in body.get("TransactItems", []):
        for operation in entry.values():
            item = operation.get("Item")
            if isinstance(item, dict) and CREATED_ATTR in item and OWNER_ATTR in item:
                item[CREATED_ATTR] = {"S": "<created>"}
    return body


@attrs.frozen
class ItemSummary:
    """One item of a request in a line: its action, the item's hash key, its condition."""

    action: str
    key: str
    #: The ConditionExpression with its placeholders filled in, for reading (not for sending).
    condition: str


_PLACEHOLDER = re.compile(r"[#:][A-Za-z0-9_]+")


def readable_condition(params: Mapping[str, Any]) -> str:
    """A request item's ConditionExpression with names and values substituted.

    ``attribute_not_exists(#g0) OR (#g1.#g0 = :g0 ...)`` →
    ``attribute_not_exists(PK) OR (owner.PK = 'ACCT#a1f9c3' ...)``.
    """
    names = params.get("ExpressionAttributeNames", {})
    values = params.get("ExpressionAttributeValues", {})

    def fill(match: re.Match[str]) -> str:
        token = match.group(0)
        if token in names:
            return str(names[token])
        if token in values:
            return repr(untyped(values[token]))
        return token

    return _PLACEHOLDER.sub(fill, str(params.get("ConditionExpression", "")))


def summarize(request: Mapping[str, Any], hash_attr: str) -> tuple[ItemSummary, ...]:
    """The items of a TransactWriteItems (or single write) request, one summary each.

    ``hash_attr`` is the table's hash-key attribute name, which identifies each item.
    """
    entries: list[tuple[str, Mapping[str, Any]]] = []
    if "TransactItems" in request:
        for entry in request["TransactItems"]:
            ((action, params),) = entry.items()
            entries.append((action, params))
    else:
        action = str(request.get("Operation", "?")).removesuffix("Item")
        entries.append((action, request))
    out = []
    for action, params in entries:
        key = params.get("Key") or params.get("Item") or {}
        shown = str(untyped(key[hash_attr])) if hash_attr in key else "?"
        out.append(ItemSummary(action, shown, readable_condition(params)))
    return tuple(out)


# --- reports -------------------------------------------------------------------------------------


@attrs.frozen
class SignupReport:
    """Step 1: ada signs up — one TransactWriteItems with her record and three locks."""

    key: str
    email: str
    #: What ``save(dry_run=True)`` returned just before the real save.
    dry_run: dict[str, Any]
    #: Every request the save sent (there should be exactly one).
    sent: tuple[Sent, ...]
    #: The lock keys ada now holds.
    locks: tuple[str, ...]

    @property
    def request(self) -> Sent | None:
        """The TransactWriteItems request that went over the wire."""
        return next((s for s in self.sent if s.operation == "TransactWriteItems"), None)

    @property
    def matches_dry_run(self) -> bool:
        """Whether the dry run is what was then sent (token and ``created`` aside)."""
        request = self.request
        return request is not None and comparable(request.body) == comparable(self.dry_run)

    @property
    def problems(self) -> tuple[str, ...]:
        """Promises this step broke (empty when all held)."""
        out = []
        if len(self.sent) != 1 or self.request is None:
            out.append(f"the signup sent {len(self.sent)} requests, not one TransactWriteItems")
        elif not self.matches_dry_run:
            out.append("the request sent differs from save(dry_run=True)")
        return tuple(out)


@attrs.frozen
class ViolationReport:
    """Step 2: a second signup with ada's email in other case is refused, naming her."""

    key: str
    email: str
    #: The UniqueViolation's message and fields.
    message: str
    fields: tuple[str, ...]
    constraint: str
    value: Any
    owner: dict[str, Any] | None
    #: Measured after the refusal: did any part of the refused signup land?
    record_written: bool
    locks_written: int

    @property
    def problems(self) -> tuple[str, ...]:
        """Promises this step broke (empty when all held)."""
        out = []
        if not self.message:
            out.append("the second signup was not refused")
        if self.record_written or self.locks_written:
            out.append("the refused signup was partly written")
        return tuple(out)


@attrs.frozen
class RaceOutcome:
    """One side of one race round."""

    #: Signups that reported success.
    winners: int
    #: Signups refused because the email was taken (dynaunique) / found taken (naive).
    refused: int
    #: Anything else that went wrong, one message each.
    errors: tuple[str, ...]
    #: Records holding the email afterwards, counted by a consistent scan.
    records: int
    #: Lock items left behind by signups that lost (dynaunique only; must be 0).
    stray_locks: int = 0


@attrs.frozen
class RaceRound:
    """One round: the same number of threads race on one fresh email, on each side."""

    number: int
    email: str
    guarded: RaceOutcome
    naive: RaceOutcome


@attrs.frozen
class RaceReport:
    """Step 3: N threads race to sign up with one email, through dynaunique and naively."""

    racers: int
    rounds: tuple[RaceRound, ...]

    @property
    def guarded_exactly_one(self) -> bool:
        """Whether every dynaunique round had exactly one winner and one stored record."""
        return all(r.guarded.winners == 1 and r.guarded.records == 1
                   and r.guarded.stray_locks == 0 and not r.guarded.errors for r in self.rounds)

    @property
    def naive_duplicate_rounds(self) -> int:
        """Rounds in which the naive pattern stored the email more than once."""
        return sum(1 for r in self.rounds if r.naive.records > 1)

    @property
    def naive_duplicates(self) -> int:
        """Records beyond the first, over all naive rounds."""
        return sum(max(0, r.naive.records - 1) for r in self.rounds)

    @property
    def problems(self) -> tuple[str, ...]:
        """Promises this step broke (empty when all held)."""
        out = []
        for r in self.rounds:
            g = r.guarded
            if g.winners != 1 or g.records != 1:
                out.append(f"round {r.number}: dynaunique had {g.winners} winners and "
                           f"{g.records} records")
            if g.stray_locks:
                out.append(f"round {r.number}: {g.stray_locks} locks left by losing signups")
            out.extend(f"round {r.number}: {e}" for e in g.errors)
        return tuple(out)


@attrs.frozen
class ChangeReport:
    """Step 4: ada changes her email; the old one is free again and grace takes it."""

    old_email: str
    new_email: str
    #: Every request ada's save sent (one TransactWriteItems: record, new lock, old lock).
    sent: tuple[Sent, ...]
    #: The items of those requests, one line each.
    items: tuple[ItemSummary, ...]
    #: The account that signed up with the old email afterwards, and the result of looking the
    #: old and the new email up through their locks.
    taker: str
    old_email_holder: str | None
    new_email_holder: str | None

    @property
    def problems(self) -> tuple[str, ...]:
        """Promises this step broke (empty when all held)."""
        out = []
        if [s.operation for s in self.sent] != ["TransactWriteItems"]:
            out.append(f"the email change sent {[s.operation for s in self.sent]}, not one "
                       "TransactWriteItems")
        if self.old_email_holder != self.taker:
            out.append("the old email did not become free for another account")
        if self.new_email_holder != ADA_KEY:
            out.append("the new email does not lead back to ada")
        return tuple(out)


@attrs.frozen
class DeleteReport:
    """Step 5: ada is deleted — her record and every lock she held, in one transaction."""

    key: str
    sent: tuple[Sent, ...]
    #: The items of those requests, one line each.
    items: tuple[ItemSummary, ...]
    #: The lock keys ada held before the delete, and those still present after it.
    held: tuple[str, ...]
    locks_left: tuple[str, ...]
    record_left: bool

    @property
    def problems(self) -> tuple[str, ...]:
        """Promises this step broke (empty when all held)."""
        out = []
        if [s.operation for s in self.sent] != ["TransactWriteItems"]:
            out.append(f"the delete sent {[s.operation for s in self.sent]}, not one "
                       "TransactWriteItems")
        if self.record_left or self.locks_left:
            out.append(f"the delete left {list(self.locks_left)} behind")
        return tuple(out)


@attrs.frozen
class LockRow:
    """One lock item as stored."""

    key: str
    constraint: str
    value: Any
    owner: str
    model: str
    #: Whether the record the lock names exists and holds this very value.
    owner_holds_it: bool


@attrs.frozen
class LockTable:
    """Step 6: every lock item on the demo table."""

    table: str
    rows: tuple[LockRow, ...]

    @property
    def problems(self) -> tuple[str, ...]:
        """Promises this step broke (empty when all held)."""
        return tuple(f"orphan lock {r.key}" for r in self.rows if not r.owner_holds_it)


# --- the scenario --------------------------------------------------------------------------------


class Demo:
    """The seed story against one target; each step method returns its report.

    Use :func:`open_demo`, which creates the two tables and always deletes them again.
    """

    def __init__(self, target: Target, *, racers: int = DEFAULT_RACERS,
                 rounds: int = DEFAULT_ROUNDS) -> None:
        if racers < 2:
            raise ValueError("a race needs at least two racers")
        if rounds < 1:
            raise ValueError("the race needs at least one round")
        self.target = target
        self.racers = racers
        self.rounds = rounds
        suffix = uuid.uuid4().hex[:8]
        #: The dynaunique table (records and locks) and the naive pattern's table.
        self.table = f"dynaunique-demo-{suffix}"
        self.naive_table = f"dynaunique-demo-{suffix}-naive"
        self.Account = account_model(self.table, target)
        info = self.Account._du_info
        assert info is not None
        self.info = info
        self.client = client_for(self.Account.Meta)
        credentials: dict[str, str] = {}
        if target.credentials is not None:
            credentials = {"aws_access_key_id": target.credentials[0],
                           "aws_secret_access_key": target.credentials[1]}
        # The naive side is plain boto3, as an application without dynaunique would write it.
        self.naive = boto3.client(
            "dynamodb", endpoint_url=target.endpoint, region_name=target.region,
            config=botocore.config.Config(max_pool_connections=max(10, racers * 2),
                                          retries={"mode": "standard", "max_attempts": 3}),
            **credentials,
        )
        self.recorder = WireRecorder(self.client)
        #: Why a table could not be deleted at the end (empty when both were).
        self.cleanup_errors: list[str] = []
        self._ada: DemoAccount | None = None

    # --- tables ----------------------------------------------------------------------------------

    def create_tables(self) -> None:
        """Create the demo table and the naive pattern's table (on-demand billing)."""
        self.Account.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
        self.naive.create_table(
            TableName=self.naive_table,
            KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        self.naive.get_waiter("table_exists").wait(TableName=self.naive_table,
                                                   WaiterConfig={"Delay": 1, "MaxAttempts": 120})

    def delete_tables(self) -> None:
        """Delete both demo tables; what could not be deleted is noted in ``cleanup_errors``.

        A table that does not exist (never created) is fine.
        """
        self.cleanup_errors.clear()
        for table in (self.table, self.naive_table):
            try:
                self.naive.delete_table(TableName=table)
            except self.naive.exceptions.ResourceNotFoundException:
                pass
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
                self.cleanup_errors.append(f"{table}: {exc}")

    # --- helpers ---------------------------------------------------------------------------------

    def _get(self, key: Mapping[str, Any]) -> dict[str, Any] | None:
        item = self.client.get_item(TableName=self.table, Key=dict(key),
                                    ConsistentRead=True).get("Item")
        return dict(item) if item is not None else None

    def _lock_exists(self, lock_key: str) -> bool:
        return self._get({"PK": {"S": lock_key}, "SK": {"S": "LOCK"}}) is not None

    def _record_exists(self, pk: str) -> bool:
        return self._get({"PK": {"S": pk}, "SK": {"S": "PROFILE"}}) is not None

    def _scan(self, client: Any, table: str, **params: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for page in client.get_paginator("scan").paginate(TableName=table, ConsistentRead=True,
                                                          **params):
            items.extend(page.get("Items", []))
        return items

    def _holder(self, email: str) -> str | None:
        try:
            found = self.Account.get_by_unique("email", email)
        except self.Account.DoesNotExist:
            return None
        return str(found.pk)

    def _items(self, sent: list[Sent]) -> tuple[ItemSummary, ...]:
        return tuple(i for s in sent for i in summarize(s.body, self.info.hash_attr))

    def _lock_keys(self, instance: Model) -> tuple[str, ...]:
        return tuple(sorted(lock.key for lock in locks_of(self.info, instance).values()))

    # --- the story -------------------------------------------------------------------------------

    def sign_up(self) -> SignupReport:
        """ada signs up: her record and her three locks in one TransactWriteItems."""
        ada = self.Account(pk=ADA_KEY, email=ADA_EMAIL, username="ada", tenant="t1", slug="home")
        dry_run = ada.save(dry_run=True)
        with self.recorder.capture() as sent:
            ada.save()
        self._ada = ada
        return SignupReport(key=ADA_KEY, email=ADA_EMAIL, dry_run=dry_run, sent=tuple(sent),
                            locks=self._lock_keys(ada))

    def duplicate_signup(self) -> ViolationReport:
        """Another account signs up with ada's email in other case: refused, nothing written."""
        other = self.Account(pk=IMPOSTOR_KEY, email=IMPOSTOR_EMAIL, username="countess",
                             tenant="t1", slug="countess")
        wanted = self._lock_keys(other)
        try:
            other.save()
        except UniqueViolation as exc:
            return ViolationReport(
                key=IMPOSTOR_KEY, email=IMPOSTOR_EMAIL, message=str(exc), fields=exc.fields,
                constraint=exc.constraint, value=exc.value, owner=exc.owner,
                record_written=self._record_exists(IMPOSTOR_KEY),
                locks_written=sum(1 for k in wanted if self._own_lock(k, IMPOSTOR_KEY)),
            )
        return ViolationReport(key=IMPOSTOR_KEY, email=IMPOSTOR_EMAIL, message="", fields=(),
                               constraint="", value=None, owner=None, record_written=True,
                               locks_written=len(wanted))

    def _own_lock(self, lock_key: str, pk: str) -> bool:
        lock = self._get({"PK": {"S": lock_key}, "SK": {"S": "LOCK"}})
        return lock is not None and untyped(lock[OWNER_ATTR]).get("PK") == pk

    def race(self) -> RaceReport:
        """``racers`` threads sign up with one fresh email per round, on each side."""
        self._warm_up()
        rounds = []
        for number in range(1, self.rounds + 1):
            email = f"race-{number}@example.com"
            guarded = self._race_guarded(number, email)
            naive = self._race_naive(number, email)
            rounds.append(RaceRound(number, email, guarded, naive))
        return RaceReport(self.racers, tuple(rounds))

    def _run_threads(self, attempt: Any) -> list[str]:
        """Run ``attempt(i, barrier)`` in ``racers`` threads released together; their results."""
        barrier = threading.Barrier(self.racers)
        results = ["" for _ in range(self.racers)]

        def run(i: int) -> None:
            try:
                results[i] = attempt(i, barrier)
            except Exception as exc:  # a thread must report, never die silently
                results[i] = f"error: {type(exc).__name__}: {exc}"

        threads = [threading.Thread(target=run, args=(i,), name=f"dynaunique-demo-racer-{i}")
                   for i in range(self.racers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return results

    def _warm_up(self) -> None:
        """Open ``racers`` connections and load botocore's operation models, as a running
        application has them.

        Without this the first round's threads queue behind connection setup and botocore's
        lazy loading, which spreads them out in time and hides the race in that round only.
        """

        def touch(i: int, barrier: threading.Barrier) -> str:
            barrier.wait()
            self._get({"PK": {"S": "ACCT#warm-up"}, "SK": {"S": "PROFILE"}})
            self._scan(self.naive, self.naive_table, FilterExpression="email = :e",
                       ExpressionAttributeValues={":e": {"S": "warm-up"}})
            return "ok"

        self._run_threads(touch)

    def _race_guarded(self, number: int, email: str) -> RaceOutcome:
        def attempt(i: int, barrier: threading.Barrier) -> str:
            account = self.Account(pk=f"ACCT#race{number}-{i:02d}", email=email,
                                   username=f"racer{number}-{i:02d}", tenant="race",
                                   slug=f"{number}-{i:02d}")
            barrier.wait()
            try:
                account.save()
            except UniqueViolation:
                return "refused"
            except DynauniqueError as exc:
                return f"error: {type(exc).__name__}: {exc}"
            return "won"

        results = self._run_threads(attempt)
        losers = {f"ACCT#race{number}-{i:02d}" for i, r in enumerate(results) if r != "won"}
        records = self._scan(self.client, self.table, FilterExpression="email = :e",
                             ExpressionAttributeValues={":e": {"S": email}})
        locks = self._scan(self.client, self.table, FilterExpression="begins_with(PK, :p)",
                           ExpressionAttributeValues={":p": {"S": RESERVED_PREFIX}})
        stray = sum(1 for lock in locks if untyped(lock[OWNER_ATTR]).get("PK") in losers)
        return RaceOutcome(
            winners=results.count("won"),
            refused=results.count("refused"),
            errors=tuple(r for r in results if r.startswith("error")),
            records=len(records),
            stray_locks=stray,
        )

    def _race_naive(self, number: int, email: str) -> RaceOutcome:
        def attempt(i: int, barrier: threading.Barrier) -> str:
            barrier.wait()
            # The textbook pattern: look for the email (even strongly consistent), then write.
            taken = self._scan(self.naive, self.naive_table, FilterExpression="email = :e",
                               ExpressionAttributeValues={":e": {"S": email}})
            if taken:
                return "refused"
            self.naive.put_item(TableName=self.naive_table, Item={
                "PK": {"S": f"ACCT#race{number}-{i:02d}"}, "email": {"S": email},
            })
            return "won"

        results = self._run_threads(attempt)
        records = self._scan(self.naive, self.naive_table, FilterExpression="email = :e",
                             ExpressionAttributeValues={":e": {"S": email}})
        return RaceOutcome(
            winners=results.count("won"),
            refused=results.count("refused"),
            errors=tuple(r for r in results if r.startswith("error")),
            records=len(records),
        )

    def change_email(self) -> ChangeReport:
        """ada changes her email; grace then signs up with ada's old one."""
        ada = self._loaded_ada()
        ada.email = ADA_NEW_EMAIL
        with self.recorder.capture() as sent:
            ada.save()
        grace = self.Account(pk=GRACE_KEY, email=ADA_EMAIL, username="grace", tenant="t1",
                             slug="grace")
        grace.save()
        return ChangeReport(
            old_email=ADA_EMAIL, new_email=ADA_NEW_EMAIL, sent=tuple(sent),
            items=self._items(sent), taker=GRACE_KEY,
            old_email_holder=self._holder(ADA_EMAIL.upper()),
            new_email_holder=self._holder(ADA_NEW_EMAIL),
        )

    def delete(self) -> DeleteReport:
        """ada is deleted: her record and every lock she held, in one transaction."""
        ada = self._loaded_ada()
        held = self._lock_keys(ada)
        with self.recorder.capture() as sent:
            ada.delete()
        return DeleteReport(
            key=ADA_KEY, sent=tuple(sent), items=self._items(sent), held=held,
            locks_left=tuple(k for k in held if self._lock_exists(k)),
            record_left=self._record_exists(ADA_KEY),
        )

    def _loaded_ada(self) -> DemoAccount:
        if self._ada is None:
            self._ada = self.Account.get(ADA_KEY, "PROFILE", consistent_read=True)
        return self._ada

    def lock_items(self) -> LockTable:
        """Every lock item on the demo table, each checked against the record it names."""
        rows = []
        for item in self._scan(self.client, self.table, FilterExpression="begins_with(PK, :p)",
                               ExpressionAttributeValues={":p": {"S": RESERVED_PREFIX}}):
            key = str(untyped(item["PK"]))
            owner = untyped(item[OWNER_ATTR])
            record = self._get(item[OWNER_ATTR]["M"])
            holds = False
            if record is not None:
                holds = key in self._lock_keys(self.Account.from_raw_data(record))
            rows.append(LockRow(
                key=key,
                constraint=str(untyped(item["constraint"])),
                value=untyped(item["value"]) if "value" in item else None,
                owner=str(owner.get("PK")),
                model=str(untyped(item["model"])),
                owner_holds_it=holds,
            ))
        rows.sort(key=lambda r: (r.constraint, r.key))
        return LockTable(self.table, tuple(rows))


@contextlib.contextmanager
def open_demo(endpoint: str | None, *, racers: int = DEFAULT_RACERS,
              rounds: int = DEFAULT_ROUNDS) -> Iterator[Demo]:
    """A :class:`Demo` with its tables created; they are deleted when the block exits.

    ``endpoint=None`` starts the embedded local server (needs the ``[local]`` extra) and stops
    it afterwards; otherwise the demo uses that endpoint with the usual AWS credentials.

    :raises DemoUnavailableError: moto is missing for the embedded server, or no credentials.
    """
    with contextlib.ExitStack() as stack:
        if endpoint is None:
            if not moto_available():
                raise DemoUnavailableError(
                    "the embedded DynamoDB server needs moto: install it with "
                    "pip install 'dynaunique[local]', or point the demo at a DynamoDB with "
                    "--endpoint URL"
                )
            from dynaunique.testing import local_dynamodb

            url = stack.enter_context(local_dynamodb())
            target = Target(url, "us-east-1", embedded=True, credentials=_LOCAL_CREDENTIALS)
        else:
            credentials = None
            if botocore.session.get_session().get_credentials() is None:
                if not is_loopback(endpoint):
                    raise DemoUnavailableError(
                        f"no AWS credentials found for {endpoint}: configure them the usual "
                        "way (AWS_PROFILE, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, aws "
                        "configure), or run the demo without --endpoint to use the embedded "
                        "server"
                    )
                # A server on this machine (moto, DynamoDB Local) accepts any credentials.
                credentials = _LOCAL_CREDENTIALS
            target = Target(endpoint, region_for(endpoint), embedded=False,
                            credentials=credentials)
        demo = Demo(target, racers=racers, rounds=rounds)
        with demo.recorder:
            try:
                demo.create_tables()
                yield demo
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError,
                    PynamoDBException) as exc:
                raise DemoUnavailableError(
                    f"DynamoDB at {target.description} failed: {exc}"
                ) from exc
            finally:
                demo.delete_tables()
