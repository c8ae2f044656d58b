"""The pages' Jinja2 templates and stylesheet, kept in Python so that no data file has to ship.

Autoescaping is on for every template: lock values and record attributes are data anyone who
can write to the table chose, so they are always escaped.
"""

# HTML lines break where the markup reads best, not at the 100 columns of the Python code.
# ruff: noqa: E501

from __future__ import annotations

import jinja2

STYLE = """
:root { --ink: #1d2430; --mute: #5b6575; --line: #d8dde5; --bg: #f6f7f9; --ok: #1f7a3a;
        --bad: #b3261e; --warn: #8a5a00; --link: #1f57c3; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
       color: var(--ink); background: var(--bg); }
header { background: #1d2430; color: #fff; padding: 10px 24px; display: flex; gap: 24px;
         align-items: baseline; }
header .brand { font-weight: 700; }
header nav a { color: #cfd8e6; margin-right: 16px; text-decoration: none; }
header nav a.here { color: #fff; border-bottom: 2px solid #fff; }
header .where { margin-left: auto; color: #9aa6b8; font-size: 12px; }
main { padding: 16px 24px 40px; max-width: 1400px; }
h1 { font-size: 20px; margin: 4px 0 12px; }
h2 { font-size: 16px; margin: 20px 0 8px; }
a { color: var(--link); }
table { border-collapse: collapse; background: #fff; width: 100%; margin: 6px 0 12px; }
th, td { border: 1px solid var(--line); padding: 5px 8px; text-align: left; vertical-align: top; }
th { background: #eef1f5; font-weight: 600; }
code, pre, .mono { font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size: 12.5px; }
pre { background: #fff; border: 1px solid var(--line); padding: 8px; margin: 4px 0;
      white-space: pre-wrap; overflow-wrap: anywhere; }
.mute { color: var(--mute); }
.cost { color: var(--mute); font-size: 12px; margin: 4px 0 12px; }
.ok { color: var(--ok); font-weight: 600; }
.bad { color: var(--bad); font-weight: 600; }
.warn { color: var(--warn); font-weight: 600; }
.tag { display: inline-block; padding: 0 6px; border-radius: 3px; background: #eef1f5;
       font-size: 12px; white-space: nowrap; }
.tag.hashed { background: #efe6fb; color: #5a2d91; }
.tag.bad { background: #fbe9e7; }
.panel { background: #fff; border: 1px solid var(--line); padding: 12px 16px; margin: 8px 0; }
.cols { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
form.inline { display: inline; }
form.bar { display: flex; gap: 10px; align-items: end; flex-wrap: wrap; margin: 8px 0; }
form.bar label { display: flex; flex-direction: column; font-size: 12px; color: var(--mute); }
input, select, button { font: inherit; padding: 4px 8px; }
button { cursor: pointer; border: 1px solid #9aa6b8; background: #fff; border-radius: 4px; }
button.primary { background: #1f57c3; border-color: #1f57c3; color: #fff; }
button.danger { background: #b3261e; border-color: #b3261e; color: #fff; }
.error { background: #fbe9e7; border: 1px solid #e6a39c; padding: 8px 12px; margin: 8px 0; }
.notice { background: #fff8e1; border: 1px solid #e6cf8a; padding: 8px 12px; margin: 8px 0; }
.pager { margin: 8px 0; display: flex; gap: 16px; }
details summary { cursor: pointer; color: var(--link); }
"""

_BASE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>{% block title %}{% endblock %} · dynaunique ui</title>
<link rel="stylesheet" href="/style.css">
</head><body>
<header><span class="brand">dynaunique ui</span>
<nav>
{% for path, label in [("/models", "Models"), ("/locks", "Locks"), ("/check", "Check")] %}
<a href="{{ path }}"{% if section == path %} class="here"{% endif %}>{{ label }}</a>
{% endfor %}
</nav>
<span class="where">{{ module }} · {{ endpoint }} ·
{% if allow_repair %}<span class="warn">repairs enabled</span>{% else %}read-only{% endif %}</span>
</header>
<main>
{% if error %}<div class="error" id="error">{{ error }}</div>{% endif %}
{% block body %}{% endblock %}
</main></body></html>
"""

_MODELS = """{% extends "base" %}{% block title %}Models{% endblock %}{% block body %}
<h1>Models and their constraints</h1>
{% for table, rows in tables %}
<h2>Table <code>{{ table }}</code></h2>
{% if modes.get(table) %}<p class="notice">A {{ modes[table] }}.</p>{% endif %}
<table id="constraints-{{ table }}">
<tr><th>model</th><th>lock name</th><th>fields</th><th>stored as</th><th>normalizer</th>
<th>hashed</th><th>condition</th><th>locks</th></tr>
{% for row in rows %}
<tr><td>{{ row.model }}</td>
<td><a href="{{ href('/locks', constraint=row.name) }}"><code>{{ row.name }}</code></a></td>
<td>{{ row.fields | join(", ") }}</td><td><code>{{ row.attributes | join(", ") }}</code></td>
<td>{{ row.normalizers | join("; ") or "-" }}</td>
<td>{% if row.hashed %}<span class="tag hashed">hashed</span>{% else %}no{% endif %}</td>
<td>{% if row.condition %}<code>{{ row.condition }}</code>{% else %}-{% endif %}</td>
<td class="count">{% if counts %}{{ counts.of(table, row.name) }}{% else %}<span class="mute">?</span>{% endif %}</td></tr>
{% endfor %}
</table>
{% if counts %}{% for name in undeclared.get(table, []) %}
<p class="notice">{{ counts.of(table, name) }} lock(s) named <code>{{ name }}</code>, which no
loaded model declares: see <a href="{{ href('/check') }}">Check</a>.</p>
{% endfor %}{% endif %}
{% endfor %}
{% if counts %}<p class="cost" id="cost">counted with {{ counts.cost.describe() }}</p>
{% else %}<form method="get" action="/models"><input type="hidden" name="count" value="1">
<button type="submit" id="count">Count locks</button>
<span class="mute">one scan of each table, projecting only keys: every item is read and billed</span>
</form>{% endif %}
{% endblock %}"""

_LOCKS = """{% extends "base" %}{% block title %}Locks{% endblock %}{% block body %}
<h1>Locks</h1>
<form class="bar" method="get" action="/locks" id="filter">
<label>constraint<select name="constraint">
<option value="">(all)</option>
{% for name in names %}<option value="{{ name }}"{% if name == constraint %} selected{% endif %}>{{ name }}</option>{% endfor %}
</select></label>
<label>value starts with<input name="prefix" value="{{ prefix }}" size="24"
{% if row and row.hashed %}disabled placeholder="hashed: use the lookup below"{% endif %}></label>
<label>model<select name="model"><option value="">(all)</option>
{% for name in model_names %}<option{% if name == model %} selected{% endif %}>{{ name }}</option>{% endfor %}
</select></label>
<label>per page<select name="limit">{% for n in [25, 50, 100, 200] %}
<option{% if n == limit %} selected{% endif %}>{{ n }}</option>{% endfor %}</select></label>
<button type="submit">Filter</button>
</form>
{% if row %}
<div class="panel">
<form class="bar" method="post" action="/lookup" id="lookup">
<input type="hidden" name="csrf" value="{{ csrf }}">
<input type="hidden" name="constraint" value="{{ row.name }}">
<input type="hidden" name="model" value="{{ row.model }}">
<strong>Who holds this {{ row.name }}?</strong>
{% for field in row.fields %}<label>{{ field }}<input name="value" autocomplete="off"
{% if row.hashed %}type="password"{% endif %}></label>{% endfor %}
<button type="submit" class="primary">Look up</button>
<span class="mute">normalized{% if row.hashed %} and hashed{% endif %} as a save would:
one consistent GetItem{% if row.hashed %}; the value is never shown{% endif %}</span>
</form></div>
{% else %}<p class="mute">Pick a constraint to look one value up exactly (one GetItem) —
listing is a scan, read page by page.</p>{% endif %}
{% if page %}
<table id="locks">
<tr><th>constraint</th><th>value</th><th>owner</th><th>model</th><th>created</th><th>expires</th></tr>
{% for lock in page.locks %}
<tr><td><code>{{ lock.constraint }}</code></td>
<td><a href="{{ href('/lock', table=lock.table, key=lock.key) }}">{% if lock.hashed %}<span class="tag hashed">hashed</span>{% else %}{{ lock.shown_value }}{% endif %}</a></td>
<td>{% if lock.owner %}<a class="owner" href="{{ href('/record', table=lock.table, key=keyp(lock.owner)) }}">{{ lock.owner_label }}</a>{% else %}-{% endif %}</td>
<td>{{ lock.model or "-" }}</td><td>{{ created(lock.created) }}</td><td>{{ when(lock.expires) }}</td></tr>
{% else %}<tr><td colspan="6" class="mute">no lock on this page</td></tr>
{% endfor %}
</table>
<div class="pager">
{% if cursor %}<a href="{{ href('/locks', constraint=constraint, prefix=prefix, model=model, limit=limit) }}" id="first">« first page</a>{% endif %}
{% if page.next_cursor %}<a href="{{ href('/locks', constraint=constraint, prefix=prefix, model=model, limit=limit, cursor=page.next_cursor) }}" id="next">next page »</a>
{% else %}<span class="mute">end of the listing</span>{% endif %}
</div>
<p class="cost" id="cost">this page: {{ page.cost.describe() }}. Locks are in scan order.
{% if page.next_cursor and page.locks | length < limit %}The page stopped reading early (time or request budget): the next page goes on where it stopped.{% endif %}</p>
{% endif %}
{% endblock %}"""

_LOCK = """{% extends "base" %}{% block title %}Lock{% endblock %}{% block body %}
<h1>Lock <code>{{ shown_key }}</code></h1>
<div class="cols">
<div class="panel" id="lock">
{% if lock %}
<table>
<tr><th>constraint</th><td><code>{{ lock.constraint }}</code></td></tr>
<tr><th>value</th><td>{% if lock.hashed %}<span class="tag hashed">hashed</span> <span class="mute">(the lock keeps only a digest)</span>{% else %}{{ lock.shown_value }}{% endif %}</td></tr>
<tr><th>owner</th><td>{% if lock.owner %}<a id="owner-link" href="{{ href('/record', table=lock.table, key=keyp(lock.owner)) }}">{{ lock.owner_label }}</a>{% else %}<span class="bad">no owner</span>{% endif %}</td></tr>
<tr><th>written by model</th><td>{{ lock.model or "-" }}</td></tr>
<tr><th>created</th><td>{{ created(lock.created) }}</td></tr>
<tr><th>expires</th><td>{{ when(lock.expires) }}</td></tr>
<tr><th>table</th><td><code>{{ lock.table }}</code></td></tr>
</table>
{% else %}
<p id="free" class="ok">No lock: {{ free_text }} is free.</p>
{% endif %}
{% if lock and lock.intent and lock.intent.pending %}<p class="warn" id="intent">A pending intent (MRSC), not a held lock: token <code>{{ lock.intent.token }}</code>, put at {{ when(lock.intent.at | int) }} by its writer's clock, {{ "within" if in_flight else "past" }} its grace period. A write in flight, or one whose writer stopped before clearing the mark: a <a href="/check">check</a> judges it.</p>{% endif %}
<p class="cost">read with 1 GetItem (strongly consistent)</p>
</div>
<div class="panel" id="owner">
<h2>Owner record</h2>
{% if not lock %}<p class="mute">-</p>
{% elif record %}{% include "record_table" %}
{% if lock.owner and not holds and not in_flight %}<p class="bad" id="not-held">This record does not hold the value any more: the lock looks like an orphan. Run a <a href="/check">check</a>.</p>{% endif %}
{% elif in_flight %}<p class="mute" id="owner-gone">The owner record {{ lock.owner_label }} does not exist yet: its write is in flight.</p>
{% else %}<p class="bad" id="owner-gone">The owner record {{ lock.owner_label }} does not exist: the lock looks like an orphan. Run a <a href="/check">check</a>.</p>{% endif %}
</div>
</div>
{% endblock %}"""

_RECORD_TABLE = """<p>{{ record.ref.label }} — {% if record.ref.model %}a <strong>{{ record.ref.model }}</strong> record{% else %}<span class="warn">no loaded model claims it</span>{% endif %}
 · <a href="{{ href('/record', table=record.ref.table, key=keyp(record.ref.key)) }}">open record</a></p>
<table class="attributes">
<tr><th>attribute</th><th>value</th></tr>
{% for name, value in record.attributes %}
<tr><td><code>{{ name }}</code></td><td>{% if name in record.hidden %}<span class="tag hashed">hashed</span> <span class="mute">(hidden: a hashed constraint protects it)</span>{% else %}{{ value }}{% endif %}</td></tr>
{% endfor %}
</table>"""

_RECORD = """{% extends "base" %}{% block title %}Record{% endblock %}{% block body %}
<h1>Record <code>{{ label }}</code></h1>
{% if record %}
<div class="panel">{% include "record_table" %}
<p class="cost">read with 1 GetItem (strongly consistent)</p></div>
<h2>The locks its current values require</h2>
<table id="expected">
<tr><th>constraint</th><th>value</th><th>status</th><th>lock owner</th></tr>
{% for expected in owner.locks %}
<tr><td><code>{{ expected.lock.constraint }}</code></td>
<td><a href="{{ href('/lock', table=record.ref.table, key=expected.lock.key) }}">{% if expected.lock.hashed %}<span class="tag hashed">hashed</span>{% else %}{{ shown(expected.lock.value) }}{% endif %}</a></td>
<td>{% if expected.status == "held" %}<span class="ok">held</span>{% elif expected.status == "pending" %}<span class="warn">pending intent</span>{% elif expected.status == "missing" %}<span class="bad">missing</span>{% else %}<span class="bad">held by another record</span>{% endif %}</td>
<td>{% if expected.stored and expected.stored.owner %}<a href="{{ href('/record', table=record.ref.table, key=keyp(expected.stored.owner)) }}">{{ expected.stored.owner_label }}</a>{% else %}-{% endif %}</td></tr>
{% else %}<tr><td colspan="4" class="mute">its values require no lock</td></tr>{% endfor %}
</table>
<p class="cost">{{ owner.cost.describe() }}</p>
{% else %}<p class="bad" id="no-record">No record has this key.</p>{% endif %}
{% endblock %}"""

_CHECK = """{% extends "base" %}{% block title %}Check{% endblock %}{% block body %}
<h1>Check: do locks and records agree?</h1>
<form method="post" action="/check" class="bar" id="run-check">
<input type="hidden" name="csrf" value="{{ csrf }}">
<button type="submit" class="primary" id="run">Run a check</button>
<span class="mute">one scan of each table, then one TransactGetItems per suspicious lock key</span>
</form>
{% if runs %}<h2>Earlier runs</h2><ul>
{% for run in runs %}<li><a href="/check/{{ run.id }}">{{ run.started }}</a> —
{% if not run.report.findings %}clean{% elif run.report.clean %}clean; {{ run.report.findings | length }} write(s) in flight{% else %}{{ run.report.findings | length }} finding(s){% endif %}</li>{% endfor %}
</ul>{% endif %}
{% endblock %}"""

_REPORT = """{% extends "base" %}{% block title %}Check report{% endblock %}{% block body %}
<h1>Check of {{ run.started }}</h1>
{% for summary in run.report.tables %}
<p>Checked <code>{{ summary.table }}</code>: {{ summary.items_scanned }} items —
{{ summary.records }} records, {{ summary.locks }} locks</p>
{% endfor %}
{% for warning in run.report.secret_warnings %}
<div class="error secret-warning">Warning: {{ warning.message }}</div>
{% endfor %}
{% if not run.report.findings %}
<p class="ok" id="clean">No findings: locks and records agree.</p>
{% else %}
{% if run.report.clean %}
<p><span class="ok" id="summary">{{ run.report.findings | length }} write(s) in flight</span>:
{{ counts }}; nothing else: locks and records agree.</p>
{% else %}
<p><span class="bad" id="summary">{{ run.report.findings | length }} finding(s)</span>:
{{ counts }}</p>
{% endif %}
{% for label, meaning in intents %}
<p class="mute intent-meaning"><strong>{{ label }}</strong>: {{ meaning }}</p>
{% endfor %}
{% if allow_repair and run.plan.actions %}
<p><a href="/repair/{{ run.id }}/all" id="repair-all"><button type="button" class="danger">Repair all {{ run.plan.actions | length }}…</button></a>
<span class="mute">each fix asks for confirmation first</span></p>
{% elif not allow_repair %}<p class="mute" id="read-only">Read-only: start <code>dynaunique ui</code> with <code>--allow-repair</code> to repair from this page, or run <code>dynaunique repair</code>.</p>{% endif %}
<table id="findings">
<tr><th>kind</th><th>constraint</th><th>value</th><th>lock owner</th><th>records holding it</th><th>why</th><th>repair</th></tr>
{% for row in rows %}
<tr class="finding {{ row.finding.kind }}">
<td><span class="tag{% if row.action is none and row.finding.kind != "pending" %} bad{% endif %}">{{ row.kind }}</span></td>
<td><code>{{ row.finding.constraint or "-" }}</code></td>
<td>{% if row.finding.lock_key %}<a href="{{ href('/lock', table=row.finding.table, key=row.finding.lock_key) }}">{% endif %}{% if row.finding.hashed %}<span class="tag hashed">hashed</span>{% else %}{{ row.finding.shown_value }}{% endif %}{% if row.finding.lock_key %}</a>{% endif %}</td>
<td>{% if row.finding.lock and row.finding.lock.owner %}<a href="{{ href('/record', table=row.finding.table, key=keyp(row.finding.lock.owner)) }}">{{ row.finding.lock.owner_label }}</a>{% else %}-{% endif %}</td>
<td>{% for holder in row.finding.holders %}<a href="{{ href('/record', table=holder.table, key=keyp(holder.key)) }}">{{ holder.label }}</a><br>{% else %}-{% endfor %}</td>
<td>{{ row.detail }}</td>
<td class="repair">{% if row.action is not none %}<span class="plan">{{ row.repair }}</span>
<details><summary>exact request</summary><pre>{{ row.request }}</pre></details>
{% if allow_repair %}<a class="repair-one" href="/repair/{{ run.id }}/{{ row.action }}"><button type="button" class="danger">Repair…</button></a>{% endif %}
{% elif row.finding.kind == "pending" %}<span class="mute">left alone:</span> {{ row.repair }}
{% else %}<span class="mute">left for a person:</span> {{ row.repair }}{% endif %}</td></tr>
{% endfor %}
</table>
{% endif %}
<p class="cost" id="cost">{{ run.report.cost.describe() }}</p>
{% endblock %}"""

_CONFIRM = """{% extends "base" %}{% block title %}Confirm repair{% endblock %}{% block body %}
<h1>Confirm {{ rows | length }} repair(s)</h1>
<p>Each fix is one TransactWriteItems, guarded on the lock and on every record involved being
exactly as the check read them (on an MRSC table, which has no transactions, each fix is the
protocol's single-item writes, each conditioned on a lock's token); records are never
modified. If anything changed since, the key
is read again and the fix decided afresh (or not made).</p>
<table id="planned">
<tr><th>fix</th><th>constraint</th><th>value</th><th>guarded write</th></tr>
{% for row in rows %}
<tr><td>{{ row.kind }}</td><td><code>{{ row.constraint }}</code></td>
<td>{% if row.hashed %}<span class="tag hashed">hashed</span>{% else %}{{ row.value }}{% endif %}</td>
<td>{{ row.description }}<details open><summary>exact request</summary><pre>{{ row.request }}</pre></details></td></tr>
{% endfor %}
</table>
<form method="post" action="/repair/{{ run.id }}/{{ which }}" class="bar" id="confirm">
<input type="hidden" name="csrf" value="{{ csrf }}">
<button type="submit" class="danger" id="confirm-repair">Confirm: send {{ rows | length }} repair(s)</button>
<a href="/check/{{ run.id }}">cancel</a>
</form>
{% endblock %}"""

_RESULT = """{% extends "base" %}{% block title %}Repair result{% endblock %}{% block body %}
<h1>Repair result</h1>
<table id="outcomes">
<tr><th>status</th><th>fix</th><th>constraint</th><th>value</th><th>detail</th></tr>
{% for row in rows %}
<tr><td class="{{ 'ok' if row.ok else 'bad' }}">{{ row.status }}</td><td>{{ row.kind }}</td>
<td><code>{{ row.constraint }}</code></td>
<td>{% if row.hashed %}<span class="tag hashed">hashed</span>{% else %}{{ row.value }}{% endif %}</td>
<td>{{ row.message }}</td></tr>
{% endfor %}
</table>
<p class="cost">{{ cost }}</p>
<form method="post" action="/check" class="bar">
<input type="hidden" name="csrf" value="{{ csrf }}">
<button type="submit" class="primary" id="run">Run the check again</button>
</form>
{% endblock %}"""

_DENIED = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>403 · dynaunique ui</title></head>
<body><h1>403 Forbidden</h1><p>{{ reason }}</p></body></html>"""

_ERROR = """{% extends "base" %}{% block title %}Error{% endblock %}{% block body %}{% endblock %}"""

TEMPLATES = {
    "base": _BASE, "models": _MODELS, "locks": _LOCKS, "lock": _LOCK, "record": _RECORD,
    "record_table": _RECORD_TABLE, "check": _CHECK, "report": _REPORT, "confirm": _CONFIRM,
    "result": _RESULT, "denied": _DENIED, "error": _ERROR,
}


def environment() -> jinja2.Environment:
    """A Jinja2 environment over :data:`TEMPLATES`, autoescaping everything."""
    return jinja2.Environment(loader=jinja2.DictLoader(TEMPLATES), autoescape=True,
                              trim_blocks=True, lstrip_blocks=True)
