"""dynaunique/_write/strong.py without a server: the protocol's timing read from a model's Meta,
and the refusal of a unit of several records on an MRSC table."""

from __future__ import annotations

from typing import Any

import pytest

from dynaunique import ConfigurationError, UnsupportedOperationError
from dynaunique._write import mrsc
from dynaunique._write.strong import refuse_unit, timing_of


def model(**settings: Any) -> Any:
    return type("Member", (), {"Meta": type("Meta", (), settings)})


def test_the_timing_is_the_protocols_defaults_or_the_models_meta() -> None:
    assert timing_of(model()) == mrsc.Timing(lease=10.0, grace=30.0)
    assert timing_of(model(mrsc_lease_seconds=2, mrsc_grace_seconds=7)) == mrsc.Timing(2.0, 7.0)
    assert timing_of(model(mrsc_grace_seconds=60)) == mrsc.Timing(10.0, 60.0)


@pytest.mark.parametrize("settings", [
    {"mrsc_lease_seconds": 30, "mrsc_grace_seconds": 30},   # no time for a request in flight
    {"mrsc_lease_seconds": 0},
    {"mrsc_grace_seconds": 5},                              # shorter than the default lease
])
def test_a_lease_not_shorter_than_the_grace_is_refused(settings: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError, match="must be positive and shorter than"):
        timing_of(model(**settings))


def test_a_lease_longer_than_the_default_is_refused() -> None:
    """check, repair and the stream guard judge intents with the default grace period."""
    with pytest.raises(ConfigurationError, match="may not be longer than 10 s"):
        timing_of(model(mrsc_lease_seconds=20, mrsc_grace_seconds=60))


def test_only_a_unit_of_one_record_without_checks_goes_by_the_protocol() -> None:
    refuse_unit(1, 0)
    for count, checks in ((2, 0), (1, 1), (0, 1)):
        with pytest.raises(UnsupportedOperationError, match="cannot write several records"):
            refuse_unit(count, checks)
