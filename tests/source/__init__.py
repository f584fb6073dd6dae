"""Tests of the Git source (gitopsq.source)."""
