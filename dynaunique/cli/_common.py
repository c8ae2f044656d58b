"""What commands share: the ``--endpoint`` option, one line and exit status 2 for every failure
that stops a command before it could do its job. (The user's models module is opened by
``dynaunique._user_models``, below the CLI, which the commands import directly.)

Exit codes of every command: 0 done (and clean); 1 a finding (``check``: drift; ``repair``:
something left for a person; ``migrate``: duplicates, or a run stopped mid-way;
``makemigrations --check``: a missing migration; ``demo``: a broken promise); 2 the command could
not run (usage, configuration, endpoint URL, region, credentials, module, table, port).
"""

from __future__ import annotations

import botocore.exceptions
import click
from pynamodb.exceptions import PynamoDBException

from dynaunique.errors import DynauniqueError, UnreachableError

__all__ = ["CannotRun", "Commands", "endpoint_option", "exit_code_of", "one_line"]


class CannotRun(click.ClickException):
    """A command could not run at all (bad module, unreachable endpoint, no credentials).

    Exit status 2, like a usage error, so that 1 keeps the meaning each command gives it
    (``check``: findings; ``demo``: a promise broken).
    """

    exit_code = 2


#: ``--endpoint``: any DynamoDB endpoint; defaults to the standard AWS environment variable.
endpoint_option = click.option(
    "--endpoint",
    envvar="AWS_ENDPOINT_URL_DYNAMODB",
    default=None,
    metavar="URL",
    help="DynamoDB endpoint URL (also AWS_ENDPOINT_URL_DYNAMODB).",
)


def one_line(exc: BaseException) -> str | None:
    """The line an expected failure prints (None: unexpected, a bug worth its traceback)."""
    if isinstance(exc, botocore.exceptions.ClientError):
        error = exc.response.get("Error", {})
        code, message = error.get("Code", ""), error.get("Message", "")
        operation = getattr(exc, "operation_name", "a request")
        if code == "ResourceNotFoundException":
            return (f"DynamoDB refused {operation}: {message or code} (does the table exist "
                    "at this endpoint and region?)")
        return f"DynamoDB refused {operation}: {code}: {message}"
    if isinstance(exc, (botocore.exceptions.BotoCoreError, PynamoDBException)):
        cause = exc.__cause__
        if isinstance(exc, PynamoDBException) and isinstance(
                cause, (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError)):
            return one_line(cause)
        return f"{type(exc).__name__}: {exc}"
    if isinstance(exc, DynauniqueError):
        return str(exc)
    return None


def exit_code_of(exc: DynauniqueError) -> int:
    """The status a dynaunique error ends a command with: its own (2 for a configuration
    mistake), and 2 as well when DynamoDB could not be reached (nothing ran), also when that
    is the cause of another error (the migrations' ``describe_table on …``)."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, UnreachableError):
            return CannotRun.exit_code
        cause = cause.__cause__
    return exc.exit_code


class Commands(click.Group):
    """The ``dynaunique`` group: an expected failure of any command is one line, exit 2."""

    def invoke(self, ctx: click.Context) -> object:
        """Run the command; turn an expected failure into :class:`CannotRun`."""
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit,
                click.exceptions.Abort):
            raise
        except (DynauniqueError, botocore.exceptions.BotoCoreError,
                botocore.exceptions.ClientError, PynamoDBException) as exc:
            line = one_line(exc) or str(exc)
            if isinstance(exc, DynauniqueError) and exit_code_of(exc) != CannotRun.exit_code:
                raise click.ClickException(line) from exc  # status 1: a run that stopped
            raise CannotRun(line) from exc
