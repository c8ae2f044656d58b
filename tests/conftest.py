"""Shared test configuration.

The local DynamoDB fixtures (``dynamodb``, ``dynaunique_endpoint``) come from the
``dynaunique.testing`` pytest plugin, which the ``pytest11`` entry point loads automatically once
the package is installed (``pip install -e '.[dev]'``); do not list it in ``pytest_plugins``
(it would be registered twice). Add fixtures here only when several test modules share them.
"""
