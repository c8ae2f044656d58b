"""Where the tools send requests (``dynaunique._transport.endpoint``): the region and credentials
each endpoint gets, decided from a controlled environment (no ~/.aws, no AWS variables)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dynaunique._transport.endpoint import (
    LOCAL_CREDENTIALS,
    Target,
    check_url,
    is_loopback,
    point_models,
    region_in_url,
    target_for,
)
from dynaunique.errors import ConfigurationError

AWS_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_SECURITY_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION",
                 "AWS_DEFAULT_REGION", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN")


@pytest.fixture
def bare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """An environment with no AWS configuration at all (and no instance metadata lookups)."""
    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return monkeypatch


@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:8000", "http://127.9.9.9:1",
                                      "http://localhost:8000/", "http://[::1]:8000"])
def test_a_loopback_endpoint_without_configuration_gets_fake_keys_and_a_region(
        bare: pytest.MonkeyPatch, endpoint: str) -> None:
    assert is_loopback(endpoint)
    assert target_for(endpoint) == Target(endpoint, "us-east-1", LOCAL_CREDENTIALS)


def test_a_loopback_endpoint_uses_the_environment_when_it_has_region_and_keys(
        bare: pytest.MonkeyPatch) -> None:
    bare.setenv("AWS_DEFAULT_REGION", "eu-west-3")
    bare.setenv("AWS_ACCESS_KEY_ID", "AKIDREAL")
    bare.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    assert target_for("http://127.0.0.1:8000") == Target("http://127.0.0.1:8000", "eu-west-3")


@pytest.mark.parametrize("endpoint", ["https://dynamodb.eu-west-1.amazonaws.com",
                                      "http://10.0.0.5:8000", "http://128.0.0.1:8000",
                                      "http://localhost.example.com:8000", None])
def test_any_other_endpoint_never_gets_fake_keys(bare: pytest.MonkeyPatch,
                                                 endpoint: str | None) -> None:
    assert endpoint is None or not is_loopback(endpoint)
    bare.setenv("AWS_DEFAULT_REGION", "ap-south-1")
    with pytest.raises(ConfigurationError, match="no AWS credentials found for"):
        target_for(endpoint)
    bare.setenv("AWS_ACCESS_KEY_ID", "AKIDREAL")
    bare.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    expected = region_in_url(endpoint) or "ap-south-1"
    assert target_for(endpoint) == Target(endpoint, expected, None)


def test_no_region_for_aws_is_a_configuration_error_not_a_guess(
        bare: pytest.MonkeyPatch) -> None:
    bare.setenv("AWS_ACCESS_KEY_ID", "AKIDREAL")
    bare.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    with pytest.raises(ConfigurationError, match="no AWS region for AWS: set AWS_DEFAULT_REGION"):
        target_for(None)
    with pytest.raises(ConfigurationError, match=r"no AWS region for http://10\.0\.0\.5:8000"):
        target_for("http://10.0.0.5:8000")
    # The region the models declare, or the one an AWS URL names, is enough.
    assert target_for(None, region="eu-north-1") == Target(None, "eu-north-1")
    assert target_for("https://dynamodb.sa-east-1.amazonaws.com").region == "sa-east-1"


def test_keys_of_the_models_own_are_enough(bare: pytest.MonkeyPatch) -> None:
    assert target_for(None, region="eu-north-1", credentials=True) == Target(None, "eu-north-1")


@pytest.mark.parametrize("endpoint", ["not a url", "localhost:8000", "ftp://127.0.0.1:21",
                                      "http://", "http://127.0.0.1:notaport"])
def test_a_malformed_endpoint_is_a_configuration_error(endpoint: str) -> None:
    with pytest.raises(ConfigurationError, match="endpoint"):
        check_url(endpoint)
    with pytest.raises(ConfigurationError):
        target_for(endpoint)


def test_point_models_keeps_what_meta_sets_and_fills_in_the_rest(
        bare: pytest.MonkeyPatch) -> None:
    class Plain:
        class Meta:
            region = None
            host = None
            aws_access_key_id = None
            aws_secret_access_key = None

        _connection = object()

    class Declared:
        class Meta:
            region = "eu-west-2"
            host = None
            aws_access_key_id = "AKIDMODEL"
            aws_secret_access_key = "model-secret"

        _connection = object()

    point_models([Plain, Declared], "http://127.0.0.1:8000")
    assert (Plain.Meta.host, Plain.Meta.region, Plain.Meta.aws_access_key_id,
            Plain._connection) == ("http://127.0.0.1:8000", "us-east-1", "testing", None)
    assert (Declared.Meta.host, Declared.Meta.region, Declared.Meta.aws_access_key_id,
            Declared.Meta.aws_secret_access_key) == ("http://127.0.0.1:8000", "eu-west-2",
                                                     "AKIDMODEL", "model-secret")
    # No endpoint: the Meta's own host decides (here, a local one).
    Plain.Meta.region, Plain.Meta.aws_access_key_id = None, None
    point_models([Plain], None)
    assert (Plain.Meta.host, Plain.Meta.region) == ("http://127.0.0.1:8000", "us-east-1")


def test_ui_signs_a_real_endpoint_with_the_environments_keys_not_the_fake_ones(
        bare: pytest.MonkeyPatch) -> None:
    uvicorn = pytest.importorskip("uvicorn")
    from dynaunique import Model
    from dynaunique.attributes import UnicodeAttribute
    from dynaunique.ui import serve

    class Remote(Model):
        class Meta:
            table_name = "remote_accounts"

        pk = UnicodeAttribute(hash_key=True)
        email = UnicodeAttribute(unique=True)

    bare.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    bare.setenv("AWS_ACCESS_KEY_ID", "AKIDREAL")
    bare.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    bare.setattr(uvicorn.Server, "run", lambda self, sockets=None: None)  # serve nothing
    printed: list[str] = []
    serve([Remote], endpoint="https://dynamodb.eu-west-1.amazonaws.com", port=0,
          echo=printed.append)
    assert printed[0].startswith("dynaunique ui: http://127.0.0.1:")
    assert (Remote.Meta.host, Remote.Meta.region, Remote.Meta.aws_access_key_id) == (
        "https://dynamodb.eu-west-1.amazonaws.com", "eu-west-1", None)


def test_ui_without_an_endpoint_needs_the_server_to_start(bare: pytest.MonkeyPatch) -> None:
    # The page imports no tool (tests/unit/test_package.py): `dynaunique ui` hands it the
    # testing kit's local server; called without one and without an endpoint, it says so.
    pytest.importorskip("uvicorn")
    from dynaunique import Model
    from dynaunique.attributes import UnicodeAttribute
    from dynaunique.errors import ConfigurationError
    from dynaunique.ui import serve

    class Nowhere(Model):
        class Meta:
            table_name = "nowhere_accounts"

        pk = UnicodeAttribute(hash_key=True)

    with pytest.raises(ConfigurationError, match=r"^no endpoint to serve: pass endpoint \(or "
                                                 r"start_server\)$"):
        serve([Nowhere], port=0, echo=lambda line: None)
