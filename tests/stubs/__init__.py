"""Local stand-ins for external services (an OpenAI-compatible server) used by tests."""
