"""PynamoDB's own test suite, run against ``dynaunique.Model``: see conformance/README.md."""
