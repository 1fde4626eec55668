"""Tests for api.importing (document → markdown note converters)."""
