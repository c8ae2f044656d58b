"""``dynaunique check --regions R1,R2``: the lock items of a global table's replicas, compared
(:func:`dynaunique.audit.compare_regions`), printed as a table or JSON."""

from __future__ import annotations

from collections.abc import Sequence

import click

from dynaunique import audit
from dynaunique._write.render import to_json
from dynaunique.cli._output import Output
from dynaunique.model import Model


def compare_regions(models: Sequence[type[Model]], regions: str, as_json: bool) -> None:
    """Compare, print, and exit 0 when the replicas agree on every lock, else 1."""
    report = audit.compare_regions(models, [r.strip() for r in regions.split(",") if r.strip()])
    if as_json:
        click.echo(to_json(report.to_dict()))
    else:
        output = Output()
        for mode in report.modes:
            output.note(f"Table {mode.table}: {mode.describe()}")
        output.note("Lock items: " + ", ".join(f"{r} {n}" for r, n in report.locks))
        if report.clean:
            output.note("The replicas agree on every lock.", "green")
        else:
            output.table(("table", "lock", "kind", *report.regions), [
                (d.table, d.lock_key, d.kind.replace("_", " "), *d.owner_labels())
                for d in report.differences])
            output.note(f"{len(report.differences)} lock(s) differ between the replicas", "red")
    click.get_current_context().exit(0 if report.clean else 1)


def print_modes(models: Sequence[type[Model]], output: Output) -> None:
    """One line per global table of ``models``: its mode and regions (nothing for the others)."""
    for mode in audit.global_modes(models):
        output.note(f"Table {mode.table}: {mode.describe()}; this check read {mode.region}'s "
                    "replica (compare the replicas with --regions)")
