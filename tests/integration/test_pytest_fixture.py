"""The plugin's ``dynaunique_models`` fixture, in a user's own test session (pytester).

The inner session is a project as a user writes it: models defined at import time, tests that
bind them with the fixture. It runs in this process with dynaunique's plugin loaded through its
``pytest11`` entry point. Its conftest points ``dynaunique_endpoint`` at this worker's server
(starting a second one would cost seconds and test nothing more); ``dynaunique_db`` and
``dynaunique_models`` are the plugin's own.
"""

from __future__ import annotations

import pytest

MODELS = '''
from dynaunique import Model, normalizers
from dynaunique.attributes import UnicodeAttribute


class Account(Model):
    class Meta:
        table_name = "accounts"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    email = UnicodeAttribute(unique=True, normalize=normalizers.casefold)


class Admin(Account):  # shares Account's Meta (and table)
    pass


class Elsewhere(Model):
    class Meta:
        table_name = "elsewhere"
        host = "http://127.0.0.1:9"
        region = "eu-west-1"
        aws_access_key_id = "mine"
        aws_secret_access_key = "secret"

    pk = UnicodeAttribute(hash_key=True)
'''

TESTS = '''
import pytest

from dynaunique import UniqueViolation
from models import Account, Admin, Elsewhere

BEFORE = {model: (dict(vars(model.Meta)), dict(vars(model)).get("_connection", "absent"))
          for model in (Account, Admin, Elsewhere)}


def test_bound_models_reach_the_test_server(dynaunique_models):
    endpoint = dynaunique_models(Account, Admin, Elsewhere)
    assert Account.Meta.host == Elsewhere.Meta.host == endpoint
    Account(pk="ACCT#1", email="ada@lovelace.io").save()
    with pytest.raises(UniqueViolation):
        Admin(pk="ACCT#2", email="ADA@lovelace.io").save()
    Elsewhere(pk="E#1").save()
    assert Elsewhere.count() == 1


def test_the_next_test_sees_the_models_as_they_were():
    for model, (meta, connection) in BEFORE.items():
        assert dict(vars(model.Meta)) == meta, model
        assert dict(vars(model)).get("_connection", "absent") == connection, model
    assert Elsewhere.Meta.host == "http://127.0.0.1:9"
    assert Account.Meta.aws_access_key_id is None


def test_a_failed_test_restores_them_too(dynaunique_models):
    dynaunique_models(Account)
    raise AssertionError("planned")


def test_after_the_failure_too():
    test_the_next_test_sees_the_models_as_they_were()


def test_each_test_starts_with_an_empty_server(dynaunique_models):
    dynaunique_models(Account)
    assert Account.count() == 0
'''

CONFTEST = '''
import os

import pytest


@pytest.fixture(scope="session")
def dynaunique_endpoint():
    return os.environ["OUTER_DYNAUNIQUE_ENDPOINT"]
'''


def test_the_fixture_binds_for_one_test_and_restores_meta(
        pytester: pytest.Pytester, dynaunique_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OUTER_DYNAUNIQUE_ENDPOINT", dynaunique_db)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(models=MODELS, test_accounts=TESTS)
    pytester.syspathinsert()

    result = pytester.runpytest_inprocess("-p", "no:xdist", "-q")

    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(["E       AssertionError: planned"])
