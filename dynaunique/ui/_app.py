"""The ASGI application behind ``dynaunique ui``: its routes and how it is served.

Every request passes :mod:`dynaunique.ui._access` first (local Host, access token, CSRF on every
POST, security headers). Repairs (POST ``/repair/...``) are refused with 403 unless the app
was created with ``allow_repair``, whatever the request carries.

The handlers only call :mod:`dynaunique.audit` (in a worker thread: boto3 blocks) and render
:mod:`dynaunique.ui._views` through :mod:`dynaunique.ui._templates`.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timezone
from typing import Any
from urllib.parse import parse_qs, urlencode

import attrs
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from dynaunique import audit
from dynaunique._lock.locks import split_lock_key, untyped
from dynaunique._transport.endpoint import point_models
from dynaunique.errors import ConfigurationError, DynauniqueError
from dynaunique.model import Model
from dynaunique.ui import _templates as templates
from dynaunique.ui import _views as views
from dynaunique.ui._access import UIConfig, _Access, _Refused, _same, local_origin

#: The only address the server binds.
HOST = "127.0.0.1"
#: A lock page sends no further Scan request that would likely end after this many seconds
#: (a sparse filter would otherwise read up to 10 requests): the page answers, with a cursor.
PAGE_SECONDS = 0.5
#: How many check reports the app keeps for their pages and repairs.
_KEPT_RUNS = 20
@attrs.frozen
class _Run:
    """One check run: its report and the repair plan made from it (pure: nothing sent)."""

    id: str
    started: str
    report: audit.AuditReport
    plan: audit.RepairPlan


class _Runs:
    """The last check runs, by id; shared by the worker threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, _Run] = {}
        self._ids = itertools.count(1)

    def add(self, report: audit.AuditReport, plan: audit.RepairPlan) -> _Run:
        with self._lock:
            started = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
            run = _Run(str(next(self._ids)), started, report, plan)
            self._runs[run.id] = run
            while len(self._runs) > _KEPT_RUNS:
                del self._runs[next(iter(self._runs))]
            return run

    def get(self, run_id: str) -> _Run | None:
        with self._lock:
            return self._runs.get(run_id)

    def recent(self) -> list[_Run]:
        with self._lock:
            return list(reversed(self._runs.values()))


# --- small helpers for the pages ----------------------------------------------------------------


def _href(path: str, **params: Any) -> str:
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return f"{path}?{query}" if query else path


def _when(epoch: int | None) -> str:
    if epoch is None:
        return "-"
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def _created(text: str | None) -> str:
    return text.replace("T", " ")[:19] + "Z" if text else "-"


def _shown(value: Any) -> str:
    if isinstance(value, tuple):
        return " / ".join(str(v) for v in value)
    return str(value)


def _first(form: dict[str, list[str]], name: str) -> str | None:
    values = form.get(name)
    return values[0] if values else None


Handler = Callable[[Request], Awaitable[Response]]


class _Pages:
    """The route handlers of one app: they share its config, templates and check runs."""

    def __init__(self, config: UIConfig, env: Any) -> None:
        self.config = config
        self.models = list(config.models)
        self.env = env
        self.runs = _Runs()

    # --- plumbing ---

    def render(self, name: str, section: str, status: int = 200, **context: Any) -> Response:
        page = self.env.get_template(name).render(
            section=section, module=self.config.module, endpoint=self.config.endpoint,
            allow_repair=self.config.allow_repair, csrf=self.config.csrf, href=_href,
            keyp=views.key_param, when=_when, created=_created, shown=_shown, **context)
        return HTMLResponse(page, status_code=status)

    async def form(self, request: Request) -> dict[str, list[str]]:
        """The urlencoded body of a POST, after checking its CSRF token and Origin."""
        origin = request.headers.get("origin")
        if origin is not None and not local_origin(origin):
            raise _Refused(403, "a page of another site may not send this form")
        body = parse_qs((await request.body()).decode("utf-8", "replace"),
                        keep_blank_values=True)
        if not _same(_first(body, "csrf"), self.config.csrf):
            raise _Refused(403, "missing or wrong CSRF token: reload the page and try again")
        return body

    def guarded(self, handler: Handler, section: str) -> Handler:
        async def run(request: Request) -> Response:
            try:
                return await handler(request)
            except _Refused as exc:
                return self.render("error", section, exc.status, error=exc.reason)
            except DynauniqueError as exc:
                return self.render("error", section, 400, error=str(exc))
        return run

    # --- models ---

    async def models_page(self, request: Request) -> Response:
        rows = views.constraint_rows(self.models)
        tables: dict[str, list[views.ConstraintRow]] = {}
        for row in rows:
            tables.setdefault(row.table, []).append(row)
        counts = None
        undeclared: dict[str, list[str]] = {}
        if request.query_params.get("count"):
            counts = await run_in_threadpool(audit.count_locks, self.models)
            declared = {(row.table, row.name) for row in rows}
            for table, name, _ in counts.counts:
                if (table, name) not in declared:
                    undeclared.setdefault(table, []).append(name)
        modes = {m.table: m.describe() for m in await run_in_threadpool(audit.global_modes,
                                                                         self.models)}
        return self.render("models", "/models", tables=sorted(tables.items()), counts=counts,
                           undeclared=undeclared, modes=modes)

    # --- locks ---

    async def locks_page(self, request: Request) -> Response:
        params = request.query_params
        constraint = params.get("constraint") or None
        model = params.get("model") or None
        cursor = params.get("cursor") or None
        try:
            limit = min(max(int(params.get("limit") or 50), 1), 500)
        except ValueError:
            limit = 50
        row = views.constraint_named(self.models, constraint) if constraint else None
        prefix = params.get("prefix") or None
        context: dict[str, Any] = dict(
            names=views.lock_names(self.models), model_names=[m.__name__ for m in self.models],
            constraint=constraint or "", model=model or "", limit=limit, cursor=cursor, row=row,
            prefix="" if row is not None and row.hashed else (prefix or ""))
        if row is not None and row.hashed and prefix is not None:
            # Never echoed: a prefix of a hashed value is still part of the value.
            return self.render("locks", "/locks", 400, page=None, **context,
                               error=f"{row.name} is hashed: its locks keep only a digest, so "
                                     "they cannot be listed by value; look one value up below")
        page = await run_in_threadpool(audit.lock_page, self.models, model=model,
                                       constraint=constraint, value_prefix=prefix,
                                       cursor=cursor, limit=limit, max_seconds=PAGE_SECONDS)
        return self.render("locks", "/locks", page=page, **context)

    async def lookup(self, request: Request) -> Response:
        form = await self.form(request)
        name = _first(form, "constraint") or ""
        row = views.constraint_named(self.models, name)
        if row is None:
            raise _Refused(400, f"no loaded model declares a constraint named {name!r}")
        values = form.get("value", [])
        try:
            model = audit.pick_model(self.models, row.name, model=_first(form, "model") or None)
            value = audit.parse_value(model, row.name, values)
            lock = await run_in_threadpool(audit.who_holds, model, row.name, value)
        except DynauniqueError as exc:
            if row.hashed:  # the message may quote the value: say only that it failed
                raise _Refused(400, f"that value cannot be looked up as {row.name} "
                                    f"({type(exc).__name__}); {row.name} is hashed, so the "
                                    "value is not shown") from exc
            raise
        if lock is not None:
            return RedirectResponse(_href("/lock", table=lock.table, key=lock.key),
                                    status_code=303)
        free = (f"that {row.name} value (hashed, not shown)" if row.hashed
                else f"{row.name} {' / '.join(values)!r}")
        return self.render("lock", "/locks", lock=None, shown_key=row.name, free_text=free)

    async def lock_page(self, request: Request) -> Response:
        key = request.query_params.get("key") or ""
        table = request.query_params.get("table") or None
        lock = await run_in_threadpool(audit.read_lock, self.models, key, table=table)
        record = holds = None
        if lock is not None and lock.owner is not None:
            record = await run_in_threadpool(audit.read_record, self.models, lock.owner,
                                             table=lock.table)
            if record is not None:
                owner = await self._owner_locks(record)
                holds = owner is not None and any(e.lock.key == lock.key for e in owner.locks)
        parsed = split_lock_key(key)
        free = key
        if parsed is not None:
            row = views.constraint_named(self.models, parsed[0])
            free = f"{parsed[0]} (hashed)" if row is not None and row.hashed else \
                f"{parsed[0]} {parsed[1]!r}"
        # An MRSC pending intent within its grace period: its owner may not hold it yet.
        in_flight = (lock is not None and lock.intent is not None
                     and lock.intent.within(audit.INTENT_GRACE, time.time()))
        return self.render("lock", "/locks", lock=lock, record=record, holds=holds,
                           shown_key=key, free_text=free, in_flight=in_flight)

    async def _owner_locks(self, record: audit.StoredRecord) -> audit.OwnerLocks | None:
        model = next((m for m in self.models if m.__name__ == record.ref.model), None)
        if model is None or model._du_info is None:
            return None
        # By attribute name: a stored owner map need not keep the hash key first.
        info = model._du_info
        key = record.ref.key
        range_value = untyped(key[info.range_attr]) if info.range_attr in key else None
        try:
            return await run_in_threadpool(audit.owner_locks, self.models,
                                           untyped(key[info.hash_attr]), range_value,
                                           model=record.ref.model)
        except DynauniqueError:
            return None  # its locks cannot be computed: the check reports it as unreadable

    async def record_page(self, request: Request) -> Response:
        table = request.query_params.get("table") or None
        try:
            key = views.parse_key_param(request.query_params.get("key") or "")
        except ValueError as exc:
            raise _Refused(400, str(exc)) from exc
        record = await run_in_threadpool(audit.read_record, self.models, key, table=table)
        owner = await self._owner_locks(record) if record is not None else None
        label = " / ".join(str(untyped(v)) for v in key.values())
        return self.render("record", "/locks", record=record, owner=owner or _NO_LOCKS,
                           label=label)

    # --- check and repair ---

    async def check_page(self, request: Request) -> Response:
        return self.render("check", "/check", runs=self.runs.recent())

    async def run_check(self, request: Request) -> Response:
        await self.form(request)
        report = await run_in_threadpool(audit.check, self.models)
        run = self.runs.add(report, audit.plan_repair(report))
        return RedirectResponse(f"/check/{run.id}", status_code=303)

    def _run(self, request: Request) -> _Run:
        run = self.runs.get(request.path_params["run"])
        if run is None:
            raise _Refused(404, "no such check run (the page keeps the last 20): run a check")
        return run

    async def report_page(self, request: Request) -> Response:
        run = self._run(request)
        rows = views.finding_rows(self.models, run.report, run.plan)
        counts = ", ".join(f"{n} {audit.KIND_LABELS[k]}"
                           for k, n in run.report.counts().items() if n)
        return self.render("report", "/check", run=run, rows=rows, counts=counts,
                           intents=views.intent_meanings(run.report))

    def _actions(self, request: Request) -> tuple[_Run, str, tuple[audit.RepairAction, ...]]:
        if not self.config.allow_repair:
            raise _Refused(403, "repairs are disabled: start dynaunique ui with --allow-repair "
                                "(or run dynaunique repair)")
        run = self._run(request)
        which = request.path_params["which"]
        if which == "all":
            return run, which, run.plan.actions
        if not which.isdigit() or int(which) >= len(run.plan.actions):
            raise _Refused(404, f"check run {run.id} plans no repair {which!r}")
        return run, which, (run.plan.actions[int(which)],)

    def _action_row(self, action: audit.RepairAction) -> dict[str, Any]:
        redactor = views.redactor_for(self.models, action.finding)
        finding = action.finding
        return {"kind": action.kind.replace("_", " "), "constraint": finding.constraint,
                "hashed": finding.hashed, "value": finding.shown_value,
                "description": redactor.text(action.description),
                "request": views.request_json(action, redactor)}

    async def confirm_repair(self, request: Request) -> Response:
        run, which, actions = self._actions(request)
        return self.render("confirm", "/check", run=run, which=which,
                           rows=[self._action_row(a) for a in actions])

    async def repair(self, request: Request) -> Response:
        run, _, actions = self._actions(request)
        await self.form(request)
        # The same guarded repair the `repair` command sends, for the chosen actions only; it
        # refuses, as the command does, while the check found locks another secret made.
        plan = attrs.evolve(run.plan, actions=actions, unfixable=())
        result = await run_in_threadpool(audit.apply_repair, plan)
        rows = [{**self._action_row(o.action), "status": o.status.replace("_", " "),
                 "ok": o.status in (audit.FIXED, audit.ALREADY_FIXED),
                 "message": views.outcome_message(self.models, o)} for o in result.outcomes]
        return self.render("result", "/check", rows=rows, cost=result.cost.describe())

    async def style(self, request: Request) -> Response:
        return Response(templates.STYLE, media_type="text/css")

    async def home(self, request: Request) -> Response:
        return RedirectResponse("/models", status_code=303)

    def routes(self) -> list[Route]:
        def route(path: str, handler: Handler, section: str, methods: Sequence[str] = ("GET",)
                  ) -> Route:
            return Route(path, self.guarded(handler, section), methods=list(methods))

        return [
            route("/", self.home, "/models"),
            route("/style.css", self.style, ""),
            route("/models", self.models_page, "/models"),
            route("/locks", self.locks_page, "/locks"),
            route("/lookup", self.lookup, "/locks", ("POST",)),
            route("/lock", self.lock_page, "/locks"),
            route("/record", self.record_page, "/locks"),
            route("/check", self.check_page, "/check"),
            route("/check", self.run_check, "/check", ("POST",)),
            route("/check/{run}", self.report_page, "/check"),
            route("/repair/{run}/{which}", self.confirm_repair, "/check"),
            route("/repair/{run}/{which}", self.repair, "/check", ("POST",)),
        ]


_NO_LOCKS = audit.OwnerLocks(None, (), audit.Cost())


def create_app(config: UIConfig) -> ASGIApp:
    """The ASGI app serving ``config.models``: guarded by its tokens, read-only by default."""
    env = templates.environment()
    pages = _Pages(config, env)
    return _Access(Starlette(routes=pages.routes()), config, env)


def serve(models: Sequence[type[Model]], *, module: str = "", endpoint: str | None = None,
          port: int = 8737, allow_repair: bool = False, echo: Callable[[str], None] = print,
          start_server: Callable[[Sequence[type[Model]]], contextlib.AbstractContextManager[str]]
          | None = None) -> None:
    """Serve the page on ``127.0.0.1:port`` until interrupted (Ctrl-C or SIGTERM).

    ``endpoint`` None serves an embedded server: ``start_server(models)`` starts it, points the
    models at it, creates their tables there, empty (nothing is seeded), and yields its URL
    (``dynaunique ui`` passes the testing kit's local server, the ``local`` extra). Otherwise
    the models are pointed at ``endpoint``, signed as every command signs
    (:func:`dynaunique._transport.endpoint.point_models`: the environment's region and credentials,
    fake ones only for a server on this machine). ``echo`` receives the lines to print, the first of
    which carries the URL with the access token.

    :raises ConfigurationError: ``port`` is in use; the endpoint, region or credentials are
        wrong or missing; neither ``endpoint`` nor ``start_server`` is given.
    """
    import uvicorn  # imported here so that create_app works without a server installed

    with contextlib.ExitStack() as stack:
        # The page's port first: if it is taken, no server is started for nothing.
        sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError as exc:
            raise ConfigurationError(f"cannot serve on {HOST}:{port}: {exc.strerror or exc} "
                                     "(pass another --port, or --port 0 for a free one)"
                                     ) from exc
        embedded = endpoint is None
        if endpoint is None:
            if start_server is None:
                raise ConfigurationError("no endpoint to serve: pass endpoint (or start_server)")
            endpoint = stack.enter_context(start_server(models))
        else:
            point_models(models, endpoint)
        # Listening before the URL is printed: a client that reads it can connect at once.
        sock.listen(128)
        bound = sock.getsockname()[1]
        where = f"{endpoint} (embedded, empty)" if embedded else endpoint
        config = UIConfig(tuple(models), allow_repair=allow_repair, module=module,
                          endpoint=where)
        echo(f"dynaunique ui: http://{HOST}:{bound}/?token={config.token}")
        echo(f"  models of {module or 'the module'} on {where}")
        if embedded:
            echo(f"  point your application at {endpoint} to fill it")
        echo("  repairs enabled: each asks for confirmation" if allow_repair
             else "  read-only (--allow-repair enables repairs)")
        echo("  Ctrl-C stops it")
        server = uvicorn.Server(uvicorn.Config(create_app(config), log_level="warning",
                                               access_log=False, lifespan="off"))
        server.run(sockets=[sock])
