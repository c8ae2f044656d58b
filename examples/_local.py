"""What the examples share: a DynamoDB endpoint, the embedded local server when none is given.

``python examples/NAME.py`` starts the embedded server (moto on 127.0.0.1, the ``local`` extra),
as ``dynaunique demo`` does, and points the models at it with fake credentials. ``--endpoint URL``
(or ``AWS_ENDPOINT_URL_DYNAMODB``, botocore's variable, which the library and the ``dynaunique``
commands read too) uses that DynamoDB instead, real AWS included: credentials and region then come
from the environment, as for any PynamoDB model. ``DYNAUNIQUE_ENDPOINT``, the examples' older
name for it, is still read when the standard variable is unset.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator
from typing import Any

from dynaunique.testing import create_tables, local_dynamodb, use_endpoint


@contextlib.contextmanager
def connected(description: str, *models: Any) -> Iterator[str]:
    """Point ``models`` at ``--endpoint`` or a local server it starts; create their tables."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--endpoint", default=os.environ.get("AWS_ENDPOINT_URL_DYNAMODB")
                        or os.environ.get("DYNAUNIQUE_ENDPOINT"),
                        help="a DynamoDB endpoint URL (default: start the embedded local server)")
    given = parser.parse_args().endpoint
    with contextlib.ExitStack() as stack:
        if given:
            url = given
            for model in models:
                model.Meta.host = url
                model._connection = None
        else:
            url = stack.enter_context(local_dynamodb())
            print(f"embedded local DynamoDB: {url}")
            use_endpoint(url, *models)
        create_tables(*models)
        yield url
