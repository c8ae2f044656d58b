"""support/botocore_loader.py: the tests' botocore sessions share one data loader, nothing else."""

from __future__ import annotations

import botocore.session
from support import botocore_loader


def test_sessions_share_the_loader_and_keep_their_own_credentials() -> None:
    botocore_loader.install()
    botocore_loader.install()  # idempotent: still one cache, not a cache of a cache
    first, second = botocore.session.get_session(), botocore.session.get_session()
    first.set_credentials("AKIDFIRST", "secret-1")
    second.set_credentials("AKIDSECOND", "secret-2")
    assert first.get_component("data_loader") is second.get_component("data_loader")
    assert first.get_credentials().access_key == "AKIDFIRST"
    assert second.get_credentials().access_key == "AKIDSECOND"
    clients = [s.create_client("dynamodb", "eu-west-1", endpoint_url="http://127.0.0.1:9")
               for s in (first, second)]
    assert clients[0] is not clients[1]
    assert [c.meta.region_name for c in clients] == ["eu-west-1", "eu-west-1"]
    assert clients[0].meta.service_model.operation_names == \
        clients[1].meta.service_model.operation_names
    assert "TransactWriteItems" in clients[0].meta.service_model.operation_names


def test_another_data_path_gets_another_loader() -> None:
    botocore_loader.install()
    default = botocore.session.get_session()
    other = botocore.session.get_session()
    other.set_config_variable("data_path", "/nonexistent/botocore-data")
    assert other.get_component("data_loader") is not default.get_component("data_loader")
    assert "/nonexistent/botocore-data" in other.get_component("data_loader").search_paths
