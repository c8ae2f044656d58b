"""The ``serve`` command: the local server in the foreground (``python -m dynaunique.testing``'s
own entry point, with the options a person types)."""

from __future__ import annotations

import click

from dynaunique.testing._local_server import LOCAL_HOST, STOCK_MOTO_ENV


@click.command("serve")
@click.option("--host", default=LOCAL_HOST, show_default=True, metavar="ADDRESS",
              help="Address to bind. The server accepts any credentials: bind another address "
                   "than this machine's only on purpose (a container's 0.0.0.0).")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535),
              metavar="N", help="Port to bind (0 picks a free one).")
@click.option("--stock-moto", is_flag=True, envvar=STOCK_MOTO_ENV,
              help="Serve moto as released, without the speed patch (slow on large tables; "
                   f"also set by {STOCK_MOTO_ENV}=1).")
def serve_command(host: str, port: int, stock_moto: bool) -> None:
    """Serve a local DynamoDB (moto, with DynamoDB's rules) until Ctrl-C.

    Prints one line, `DYNAUNIQUE-LOCAL-READY http://127.0.0.1:8000`, once it listens; point the
    library and the other commands at that URL with
    AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000 (any credentials and region will do). Its
    tables live in memory and are gone when it stops. Needs the local extra (moto), which the
    package's dev and local extras install.
    """
    try:
        import moto  # noqa: F401
    except ImportError as exc:
        raise click.ClickException(
            f"dynaunique serve needs the local extra ({exc}): "
            "pip install -e '/path/to/clone[local]'") from exc
    from dynaunique.testing._local_server import _serve_main

    argv = ["--host", host, "--port", str(port), "--ignore-stdin"]
    raise click.exceptions.Exit(_serve_main([*argv, "--stock-moto"] if stock_moto else argv))


#: The click commands this module adds to ``dynaunique``.
COMMANDS: list[click.Command] = [serve_command]
