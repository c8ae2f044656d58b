"""What the test layers share: models, recorders of what was sent, fixtures helpers and the one
invariant checker (see tests/README.md)."""
