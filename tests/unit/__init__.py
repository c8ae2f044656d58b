"""Tests of pure code: no server, no network (see tests/README.md)."""
