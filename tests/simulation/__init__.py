"""Deterministic simulation of several clients against an in-memory DynamoDB (issue 25)."""
