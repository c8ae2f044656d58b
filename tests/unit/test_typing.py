"""Type-checker friendliness: dynaunique's attribute constructors keep PynamoDB's typed parameters.

Each snippet below is a small module that mypy (``mypy.api.run``, in-process, ``--strict``)
checks in one run. The valid declarations must type-check with no error at all; each invalid one
must produce exactly one error, on its line, saying what is wrong: a typo in a keyword
(``nul=True``) is caught before the code ever runs.
"""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
from mypy import api as mypy_api

import dynaunique
from dynaunique import normalizers
from dynaunique.attributes import UniqueOptions

# Drives another program (tests/README.md, "Two runs"): CI's second pytest step.
pytestmark = pytest.mark.external

# Valid declarations, every unique option together with PynamoDB's own parameters. assert_type
# pins what the declarations give back: the attribute on the class, the value on an instance.
VALID = """
from datetime import datetime
from typing_extensions import assert_type

from dynaunique import Model, normalizers
from dynaunique.attributes import (
    BinaryAttribute,
    BooleanAttribute,
    JSONAttribute,
    ListAttribute,
    NumberAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
    UTCDateTimeAttribute,
)


class TypedAccount(Model):
    class Meta:
        table_name = "typing_accounts"

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(
        null=True, unique=True, normalize=normalizers.casefold, lock_name="EMAIL"
    )
    handle = UnicodeAttribute(unique=True, normalize=str.casefold, attr_name="h", default="x")
    number = NumberAttribute(unique=True, hashed=True, default=0)
    blob = BinaryAttribute(unique=True, null=True, legacy_encoding=False)
    born = UTCDateTimeAttribute(unique=True, null=True, default_for_new=datetime.now)
    active = BooleanAttribute(null=True)
    tags = UnicodeSetAttribute(null=True)
    notes = ListAttribute(of=UnicodeAttribute, null=True)
    extra = JSONAttribute(null=True)


assert_type(TypedAccount.email, UnicodeAttribute)
assert_type(TypedAccount(pk="a").email, str)
assert_type(TypedAccount(pk="a").number, float)
assert_type(TypedAccount(pk="a").blob, bytes)
assert_type(TypedAccount(pk="a").born, datetime)
"""

# (snippet line, part of mypy's message) for each invalid declaration; each gets its own module
# so that one error cannot hide another.
INVALID = {
    "typo_null": (
        'UnicodeAttribute(nul=True)',
        'Unexpected keyword argument "nul" for "UnicodeAttribute"',
    ),
    "typo_unique": (
        'NumberAttribute(uniqe=True)',
        'Unexpected keyword argument "uniqe" for "NumberAttribute"',
    ),
    "normalize_not_callable": (
        'UnicodeAttribute(unique=True, normalize="casefold")',
        'Argument "normalize" to "UnicodeAttribute" has incompatible type "str"',
    ),
    "lock_name_not_str": (
        'UnicodeAttribute(unique=True, lock_name=3)',
        'Argument "lock_name" to "UnicodeAttribute" has incompatible type "int"',
    ),
    "default_wrong_type": (
        'UnicodeAttribute(unique=True, default=5)',
        'Argument "default" to "UnicodeAttribute" has incompatible type "int"',
    ),
    "binary_without_legacy_encoding": (
        'BinaryAttribute(unique=True)',
        'Missing named argument "legacy_encoding" for "BinaryAttribute"',
    ),
    "typo_on_binary": (
        'BinaryAttribute(legacy_encoding=False, nul=True)',
        'Unexpected keyword argument "nul" for "BinaryAttribute"',
    ),
    # A set cannot be unique: a ConfigurationError at run time, and already a type error.
    "unique_on_a_set": (
        'UnicodeSetAttribute(unique=True)',
        'Unexpected keyword argument "unique" for "UnicodeSetAttribute"',
    ),
    "typo_on_list": (
        'ListAttribute(of=UnicodeAttribute, nul=True)',
        'Unexpected keyword argument "nul" for "ListAttribute"',
    ),
}

INVALID_TEMPLATE = """
from dynaunique.attributes import (
    BinaryAttribute,
    ListAttribute,
    NumberAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
)

attribute = {call}
"""

ERROR_LINE = re.compile(r"^(?P<module>\w+)\.py:(?P<line>\d+): error: (?P<message>.*)$")


@pytest.fixture(scope="module")
def mypy_errors(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[int, str]]]:
    """Run mypy once over every snippet; map each snippet module to its (line, message) errors."""
    root = tmp_path_factory.mktemp("typing")
    (root / "valid.py").write_text(textwrap.dedent(VALID))
    for name, (call, _) in INVALID.items():
        (root / f"{name}.py").write_text(INVALID_TEMPLATE.format(call=call))
    package_root = Path(dynaunique.__file__).resolve().parent.parent
    stdout, stderr, _ = _run_mypy(root, package_root)
    errors: dict[str, list[tuple[int, str]]] = {"valid": [], **{name: [] for name in INVALID}}
    for line in stdout.splitlines():
        match = ERROR_LINE.match(line)
        if match:
            errors[match["module"]].append((int(match["line"]), match["message"]))
    assert not stderr, stderr
    return errors


def _run_mypy(root: Path, package_root: Path) -> tuple[str, str, int]:
    """mypy --strict over the snippets in root, finding dynaunique in its source tree."""
    # An editable install is an import hook mypy cannot follow, so point it at the source tree;
    # an installed copy (a wheel) is found in site-packages through its py.typed.
    env_path = str(package_root) if (package_root / "pyproject.toml").exists() else ""
    old_cwd, old_path = os.getcwd(), os.environ.get("MYPYPATH")
    os.chdir(root)
    os.environ["MYPYPATH"] = env_path
    try:
        return mypy_api.run([
            "--strict", "--config-file=", "--no-incremental", "--show-error-codes",
            "--no-error-summary", "--hide-error-context",
            *sorted(p.name for p in root.glob("*.py")),
        ])
    finally:
        os.chdir(old_cwd)
        if old_path is None:
            del os.environ["MYPYPATH"]
        else:
            os.environ["MYPYPATH"] = old_path


def test_valid_declarations_type_check(mypy_errors: dict[str, list[tuple[int, str]]]) -> None:
    """Every unique option and PynamoDB parameter together: no error, the value types intact."""
    assert mypy_errors["valid"] == []


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_declaration_is_a_type_error(
    mypy_errors: dict[str, list[tuple[int, str]]], name: str
) -> None:
    """Exactly one error, on the declaration's line, naming the wrong argument."""
    _, expected = INVALID[name]
    line = INVALID_TEMPLATE.splitlines().index("attribute = {call}") + 1
    [(error_line, message)] = mypy_errors[name]
    assert (error_line, expected in message) == (line, True), message


def test_valid_declarations_also_run() -> None:
    """The snippet mypy accepts is a model dynaunique accepts at class definition."""
    namespace: dict[str, Any] = {}
    exec(compile(textwrap.dedent(VALID), "valid.py", "exec"), namespace)
    attributes = namespace["TypedAccount"].get_attributes()
    unique = {name: (a.normalize, a.lock_name, a.hashed)
              for name, a in attributes.items() if isinstance(a, UniqueOptions) and a.unique}
    assert unique == {
        "email": (normalizers.casefold, "EMAIL", False),
        "handle": (str.casefold, None, False),
        "number": (None, None, True),
        "blob": (None, None, False),
        "born": (None, None, False),
    }
    assert attributes["blob"].legacy_encoding is False
