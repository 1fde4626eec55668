"""Runnable maintenance jobs (`python -m scripts.<name>`)."""
