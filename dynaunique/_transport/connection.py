"""The one boundary to DynamoDB: every request goes through a model's PynamoDB connection, once.

``connection_for(model)`` is the model's own PynamoDB connection (``model._get_connection()
.connection``: what PynamoDB itself writes through), its botocore client wired with the request
path of ``dynaunique._transport.wire``; so the client's event handlers, a ``Stubber`` on it,
``mock_aws``, its session and settings apply to the library's requests as to PynamoDB's. Each of the
library's requests is sent once (``_botocore.once``): the client keeps PynamoDB's retry settings for
PynamoDB's own calls, and :func:`send` retries the library's, so that it knows when a resend
follows an ambiguous failure. Requests go through ``Connection.dispatch``, so PynamoDB's
``pre_dynamodb_send``/``post_dynamodb_send`` signals fire and a mock of
``Connection._make_api_call`` sees them.

The logic does no I/O itself: :func:`exchange_steps` is a generator that yields each step —
:class:`Request` "send this", :class:`Sleep` "back off this long" — and receives each answer as
a value of ``dynaunique._transport.answers`` (:class:`Ok`, :class:`Refused`, :class:`Ambiguous`,
:class:`Unreachable`). It is the library's one retry loop, and ``_answers.RETRYABLE`` /
``_answers.AMBIGUOUS`` its one table of errors: throttling and conflicts are retried with jittered
backoff; a request that may have been applied is resent only when the caller says a resend is
safe; any other refusal is handed back (:func:`send_steps` turns it into the library's error,
:func:`~dynaunique._transport.answers.error_for`). :func:`run` drives it (and every generator built
on it: a flush, a read) synchronously; ``dynaunique.aio`` drives the very same generators under
asyncio. One logic, two senders, one vocabulary between them.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from functools import lru_cache
from itertools import repeat
from typing import Any, TypeVar

import attrs
from pynamodb import settings as _settings
from pynamodb.connection import Connection
from pynamodb.settings import get_settings_value

from dynaunique._transport import botocore as _botocore
from dynaunique._transport import clients as _clients
from dynaunique._transport import regions as _regions
from dynaunique._transport.answers import (
    Ambiguous,
    Answer,
    Ok,
    Refused,
    Unreachable,
    answer_of,
    code_of,
    error_for,
    retryable,
)

# The connections' API, kept importable here (the callers' and the tests' one boundary).
from dynaunique._transport.clients import connection_for
from dynaunique.errors import DynauniqueError, UnsupportedOperationError
from dynaunique.observe import connection_logger as _log
from dynaunique.observe import emit, stats


@attrs.frozen
class RetryPolicy:
    """How often and how long :func:`send` retries.

    Conflicts and throttling are retried up to ``max_conflict_retries`` times; network failures
    and 5xx answers up to ``max_network_retries`` times, resending the very same request.
    :func:`policy_for` builds one from a model's ``Meta`` (``max_retry_attempts``,
    ``base_backoff_ms``), as PynamoDB's own connection would retry.
    """

    max_conflict_retries: int = 8
    #: PynamoDB's default ``max_retry_attempts``: a request sent without a model's setting
    #: (the audit's reads) makes the same 1 + 3 attempts as a save.
    max_network_retries: int = 3
    base_delay: float = 0.01
    max_delay: float = 1.0

    def delay(self, attempt: int) -> float:
        """Full-jitter exponential backoff for the ``attempt``-th retry (1-based)."""
        return random.uniform(0, min(self.max_delay, self.base_delay * (2 ** attempt)))


DEFAULT_POLICY = RetryPolicy()


def policy_for(meta: Any) -> RetryPolicy:
    """The retry policy of a model's ``Meta``: ``max_retry_attempts`` network resends (PynamoDB's
    setting, default 3) and ``base_backoff_ms`` as the base delay (default 25 ms)."""
    attempts = getattr(meta, "max_retry_attempts", None)
    if attempts is None:
        attempts = get_settings_value("max_retry_attempts")
    backoff_ms = getattr(meta, "base_backoff_ms", None)
    if backoff_ms is None:
        backoff_ms = get_settings_value("base_backoff_ms") or 25
    return _policy(int(attempts), float(backoff_ms))


@lru_cache(maxsize=64)
def _policy(attempts: int, backoff_ms: float) -> RetryPolicy:
    return RetryPolicy(max_conflict_retries=max(DEFAULT_POLICY.max_conflict_retries, attempts),
                       max_network_retries=attempts, base_delay=backoff_ms / 1000.0)


# --- connections ---------------------------------------------------------------------------------

def _meta_value(meta: Any, name: str) -> Any:
    value = getattr(meta, name, None)
    return value if value is not None else get_settings_value(name)


#: The ``Meta`` attributes (own or inherited) a model's connection and retry policy are made of.
_META_SETTINGS = ("region", "host", "aws_access_key_id", "aws_secret_access_key", "home_region",
                  "aws_session_token", "connect_timeout_seconds", "read_timeout_seconds",
                  "max_pool_connections", "extra_headers", "max_retry_attempts", "base_backoff_ms",
                  "table_name")


def _made_of(meta: Any) -> tuple[Any, ...]:
    # What PynamoDB's connection and policy_for read: the Meta's settings, then PynamoDB's.
    overrides = _settings.override_settings
    return (*map(getattr, repeat(meta), _META_SETTINGS, repeat(None)), overrides,
            _settings.default_settings_dict, getattr(overrides, "__dict__", None))


#: model → (what its connection and policy were made of, its TableConnection, the pair, the
#: count of ``_regions.forget`` calls its route was made after).
_sendings: dict[Any, tuple[tuple[Any, ...], Any, tuple[Connection, RetryPolicy], int]] = {}


def sending_for(model: Any) -> tuple[Connection, RetryPolicy]:
    """``(connection_for(model), policy_for(model.Meta))``, kept per model: made again when
    PynamoDB's connection of the model was replaced (``Model._connection = None``) or one of the
    settings it is made of changed (``Meta.host = ...``, PynamoDB's settings): then the model's
    PynamoDB connection is dropped first, so that PynamoDB makes it again from them, as the
    library's own used to be (a retargeted model needs no reset). A global table's write goes to
    its home region (``_regions.route``), routed again after ``_regions.forget`` (the model's
    own connection, and the handlers on its client, are kept then)."""
    meta = model.Meta
    made_of = _made_of(meta)
    known = _sendings.get(model)
    if (known is None or known[1] is not model._connection or known[0] != made_of
            or known[3] != _regions.known):
        if known is not None and known[0] != made_of and known[1] is model._connection:
            model._connection = None    # (unless it was made again already: it is up to date)
        routed_after = _regions.known
        own = connection_for(model)
        # Its mode asked through its own client; an MRSC table is written by the protocol.
        homed = _regions.route(meta, lambda _meta: own, strong=True)
        pair = (own if homed is meta else _clients.connection_in(model, homed), policy_for(homed))
        # Copies: a dict changed in place (extra_headers, the settings) is a change.
        known = _sendings[model] = (tuple(dict(v) if isinstance(v, dict) else v for v in made_of),
                                    model._connection, pair, routed_after)
    return known[2]


def sending_for_models(models: Sequence[Any]) -> tuple[Connection, RetryPolicy]:
    """The sending of one request that writes items of ``models`` (a unit of work): the first
    model's, when every model's client goes to the same endpoint and region.

    :raises UnsupportedOperationError: they do not (one transaction goes to one DynamoDB).
    """
    sendings = [sending_for(model) for model in models]
    first = sendings[0][0]
    if len({id(connection) for connection, _ in sendings}) > 1:
        where = {_clients.target_of(connection) for connection, _ in sendings}
        if len(where) > 1:
            raise UnsupportedOperationError(
                "the models of one atomic() block point at different endpoints or regions; one "
                "transaction can only go to one DynamoDB"
            )
    return first, sendings[0][1]


# --- sending -------------------------------------------------------------------------------------


@attrs.frozen
class Request:
    """A step of a sans-IO exchange: send this request through ``connection``.

    The driver answers with an :class:`Answer`: :class:`Ok` with DynamoDB's response, or the
    failure :func:`answer_of` reads from what the sending raised.
    """

    connection: Connection
    operation: str
    params: Mapping[str, Any]


@attrs.frozen
class Sleep:
    """A step of a sans-IO exchange: wait ``seconds`` (a backoff), then go on."""

    seconds: float


#: What a sans-IO generator yields. Its driver performs each step and sends back the result:
#: :func:`run` here, ``dynaunique.aio.arun`` under asyncio.
Step = Request | Sleep
_T = TypeVar("_T")
Steps = Generator[Step, Any, _T]


def answer(request: Request) -> Answer | BaseException:
    """Send ``request`` through its PynamoDB connection (``Connection.dispatch``), once (the
    client's own retries are this loop's: ``_botocore.once``): its answer, or the exception when it
    says nothing about the request (:func:`answer_of`)."""
    if isinstance(request.connection, Connection):   # (a test's stand-in answers by itself)
        client = request.connection.client
        if _botocore.installed_call(client) is None:    # a client PynamoDB made again
            _clients.install(client)
    token = _botocore.once.set(True)
    try:
        return Ok(dict(request.connection.dispatch(request.operation, dict(request.params))))
    except Exception as exc:
        failure = answer_of(exc)
        return exc if failure is None else failure
    finally:
        _botocore.once.reset(token)


def run(steps: Steps[_T], *, sleep: Callable[[float], None] = time.sleep) -> _T:
    """Drive ``steps`` synchronously: each request through its PynamoDB connection, answered
    with an :class:`Answer` (an exception that is no answer — a bug — is thrown in as it is)."""
    try:
        step = next(steps)
        while True:
            if isinstance(step, Sleep):
                sleep(step.seconds)
                step = steps.send(None)
                continue
            got = answer(step)
            step = steps.throw(got) if isinstance(got, BaseException) else steps.send(got)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


def _received(answer: Any) -> Answer:
    """What a driver sent back: an :class:`Answer`; a generator driven by hand (a test, the
    simulation) may send the response dict itself."""
    if isinstance(answer, (Ok, Refused, Ambiguous, Unreachable)):
        return answer
    return Ok(dict(answer))


def exchange_steps(connection: Connection, operation: str, params: Mapping[str, Any], *,
                   policy: RetryPolicy = DEFAULT_POLICY, resend_safe: bool = True,
                   ambiguous: bool = False, on_throttle: Callable[[str], None] | None = None,
                   error: type[DynauniqueError] = DynauniqueError,
                   until: float | None = None) -> Steps[Ok | Refused]:
    """The one retry loop, without I/O: yields each attempt and each backoff and decides on
    each answer. Ends with :class:`Ok`, or the :class:`Refused` that is not retried (for the
    caller to read: a failed condition…); raises :func:`error_for`'s error when the retries run
    out or a resend is not possible (``on_throttle(code)`` is told of each throttling refusal:
    an adaptive rate slows down). ``until``: no retry nor resend at or after this time
    (``time.time()``; the MRSC record write's lease): a retryable refusal is then handed back,
    an unanswered attempt is the retries running out."""
    conflicts = 0
    network = 0
    st = stats()
    while True:
        if st is not None:
            st.round_trips += 1
        if _log.isEnabledFor(logging.DEBUG):
            # Operation and table only: item values may be personal data.
            emit(_log, logging.DEBUG, "request", f"sending {operation}",
                 operation=operation, table=_tables(params))
        try:
            got = _received((yield Request(connection, operation, dict(params))))
        except Exception as exc:  # a generator driven by hand (a test) may throw the exception
            failure = answer_of(exc)
            if failure is None:
                raise
            got = failure
        if isinstance(got, Ok):
            return got
        late = until is not None and time.time() >= until
        if isinstance(got, Refused):
            if not retryable(got) or late:
                return attrs.evolve(got, ambiguous=True) if ambiguous else got
            conflicts += 1
            if conflicts > policy.max_conflict_retries:
                raise error_for(got, operation, params, error=error, attempts=conflicts)
            reason = "conflict" if _conflict(got) else "throttling"
            if reason == "throttling" and on_throttle is not None:
                on_throttle(got.code)
            yield _backoff(operation, params, reason, conflicts, policy.delay(conflicts),
                           False, got.code)
            continue
        # Not answered: a resend is safe only if the request cannot apply twice.
        ambiguous = ambiguous or isinstance(got, Ambiguous)
        network += 1
        if (got.lasting or (ambiguous and not resend_safe) or network > policy.max_network_retries
                or late):
            raise error_for(got, operation, params, error=error, attempts=network,
                            ambiguous=ambiguous, resend_safe=resend_safe)
        yield _backoff(operation, params, "network", network, policy.delay(network),
                       ambiguous, code_of(got.cause))


def send_steps(connection: Connection, operation: str, params: Mapping[str, Any], *,
               policy: RetryPolicy = DEFAULT_POLICY, resend_safe: bool = True,
               ambiguous: bool = False, on_throttle: Callable[[str], None] | None = None,
               error: type[DynauniqueError] = DynauniqueError) -> Steps[dict[str, Any]]:
    """:func:`exchange_steps` for a caller that reads no refusal: DynamoDB's response, or
    :func:`error_for`'s error (in ``error``'s words)."""
    got = yield from exchange_steps(connection, operation, params, policy=policy,
                                    resend_safe=resend_safe, ambiguous=ambiguous,
                                    on_throttle=on_throttle, error=error)
    if isinstance(got, Refused):
        raise error_for(got, operation, params, error=error)
    return got.data


def _tables(params: Mapping[str, Any]) -> list[str]:
    """The tables a request touches (a transaction's, in item order, each once)."""
    if "TableName" in params:
        return [str(params["TableName"])]
    tables: dict[str, None] = {}
    for item in params.get("TransactItems") or []:
        for body in item.values():
            tables[str(body.get("TableName"))] = None
    return list(tables)


def _conflict(refused: Refused) -> bool:
    """Whether a retryable refusal is a conflict with another transaction (else throttling)."""
    codes = {refused.code}
    codes.update(str(r.get("Code")) for r in refused.reasons)
    return bool(codes & _CONFLICTS)


_CONFLICTS = frozenset({"TransactionConflict", "TransactionConflictException",
                        "TransactionInProgressException", "ReplicatedWriteConflictException"})


def _backoff(operation: str, params: Mapping[str, Any], reason: str, attempt: int, delay: float,
             ambiguous: bool, code: str) -> Sleep:
    """The backoff before the next attempt, logged: a ``resend`` when the failed attempt may
    have applied, else a ``retry`` (conflicts at INFO — normal under contention —, throttling
    and network failures at WARNING)."""
    st = stats()
    if st is not None:
        st.retries += 1
    if ambiguous:
        token = params.get("ClientRequestToken")
        emit(_log, logging.WARNING, "resend",
             f"resending {operation} after an ambiguous failure ({code}; attempt {attempt}, "
             f"in {delay:.3f} s){f'; token {token}' if token else ''}",
             operation=operation, token=token, code=code, attempt=attempt, delay=delay)
    else:
        level = logging.INFO if reason == "conflict" else logging.WARNING
        emit(_log, level, "retry",
             f"retrying {operation} after {reason} ({code}; attempt {attempt}, in {delay:.3f} s)",
             operation=operation, reason=reason, code=code, attempt=attempt, delay=delay)
    return Sleep(delay)


def send(connection: Connection, operation: str, params: Mapping[str, Any], *,
         policy: RetryPolicy = DEFAULT_POLICY, resend_safe: bool = True,
         sleep: Callable[[float], None] = time.sleep,
         ambiguous: bool = False, on_throttle: Callable[[str], None] | None = None,
         error: type[DynauniqueError] = DynauniqueError) -> dict[str, Any]:
    """Send one request through ``connection``, retrying as the error table says: DynamoDB's
    response, or the library's error for the failure (:func:`error_for`, in ``error``'s words).

    ``resend_safe=False``: after a failure that may have been applied, raise
    :class:`~dynaunique.errors.OutcomeUnknownError` instead of resending. ``ambiguous=True``:
    an earlier call already resent this request.

    :raises DynauniqueError: DynamoDB refused the request (condition failed, validation, …).
    :raises UnreachableError: DynamoDB was never reached; nothing was applied.
    :raises OutcomeUnknownError: the resends ran out after a failure that may have applied.
    """
    return run(send_steps(connection, operation, params, policy=policy, resend_safe=resend_safe,
                          ambiguous=ambiguous, on_throttle=on_throttle, error=error), sleep=sleep)


def exchange(connection: Connection, operation: str, params: Mapping[str, Any], *,
             policy: RetryPolicy = DEFAULT_POLICY, sleep: Callable[[float], None] = time.sleep,
             on_throttle: Callable[[str], None] | None = None,
             error: type[DynauniqueError] = DynauniqueError) -> Ok | Refused:
    """:func:`send` for a caller that reads a refusal itself (a failed condition, an expired
    stream iterator): :class:`Ok` or the :class:`Refused` that is not retried."""
    return run(exchange_steps(connection, operation, params, policy=policy,
                              on_throttle=on_throttle, error=error), sleep=sleep)


_R = TypeVar("_R")


def in_batches(items: Sequence[_R], size: int, send: Callable[[list[_R]], Sequence[_R]], *,
               policy: RetryPolicy, what: str, error: type[DynauniqueError] = DynauniqueError,
               sleep: Callable[[float], None] = time.sleep) -> None:
    """Send ``items`` in chunks of ``size`` (BatchGetItem: 100, BatchWriteItem: 25).

    ``send`` sends one chunk (through :func:`send`, which retries each request) and returns what
    DynamoDB left unprocessed; that goes back to the front after a backoff, as throttling does,
    up to ``policy.max_conflict_retries`` times in a row before ``error`` is raised. The one
    loop over a batch's leftovers, for the audit's and the migrations' batch reads and writes.
    """
    pending = list(items)
    attempts = 0
    while pending:
        chunk, pending = pending[:size], pending[size:]
        left = list(send(chunk))
        if not left:
            continue
        attempts += 1
        if attempts > policy.max_conflict_retries:
            raise error(f"DynamoDB kept leaving {what} unprocessed ({attempts} tries); "
                        "try again later")
        sleep(policy.delay(attempts))
        pending = left + pending
