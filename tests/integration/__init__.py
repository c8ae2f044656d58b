"""Tests against the local server (moto in server mode on 127.0.0.1; see tests/README.md)."""
