"""Settings: the original variable names, defaults, and fail-fast errors naming the variable."""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from api.config import SettingsError, load_settings

ROOT = Path(__file__).resolve().parents[1]


def test_defaults_and_environment_names(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("MONGODB_URL", "OPENAI_API_KEY", "EMBEDDING_PROVIDER", "CHAT_MODEL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CHUNKING_MAX_TOKENS", "200")
    monkeypatch.setenv("CHUNKING_ASYNC", "false")
    s = load_settings()
    assert s.chunking_max_tokens == 200 and s.chunking_async is False
    assert s.mongodb_url is None and s.embedded_database
    assert s.resolved_embedding_provider == "local"
    assert s.autonote_host == "127.0.0.1" and s.autonote_port == 8000
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert load_settings().resolved_embedding_provider == "openai"


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"CHUNKING_MAX_TOKENS": "0"}, "CHUNKING_MAX_TOKENS"),
        ({"CHUNKING_STRATEGY": "magic"}, "CHUNKING_STRATEGY"),
        ({"SEARCH_BACKEND": "elastic"}, "SEARCH_BACKEND"),
        ({"MONGODB_URL": "postgres://x"}, "MONGODB_URL"),
        ({"CHUNKING_ENABLED": "maybe"}, "CHUNKING_ENABLED"),
        ({"EMBEDDING_PROVIDER": "openai"}, "OPENAI_API_KEY"),
        ({"CHUNKING_MIN_TOKENS": "400"}, "CHUNKING_MIN_TOKENS"),
        ({"CHUNKING_TARGET_TOKENS": "400"}, "CHUNKING_TARGET_TOKENS"),
        ({"CHUNKING_TARGET_TOKENS": "0"}, "CHUNKING_TARGET_TOKENS"),
        # Accepted once, then failing at request time or at the first connection:
        ({"MONGODB_URL": "mongodb://db.example:27O17"}, "MONGODB_URL"),
        ({"MONGODB_URL": "mongodb://"}, "MONGODB_URL"),
        ({"MONGODB_URL": "mongodb+srv://a.example:27017"}, "MONGODB_URL"),
        ({"OPENAI_API_KEY": "sk-x", "OPENAI_BASE_URL": "notaurl"}, "OPENAI_BASE_URL"),
        ({"AUTONOTE_HOST": "  "}, "AUTONOTE_HOST"),
        ({"AUTONOTE_DATA_DIR": " "}, "AUTONOTE_DATA_DIR"),
        (
            {"AUTONOTE_INDEX_BACKOFF_BASE_S": "1000", "AUTONOTE_INDEX_BACKOFF_MAX_S": "10"},
            "AUTONOTE_INDEX_BACKOFF_BASE_S",
        ),
        ({"EMBEDDING_MODEL": "text-embedding-3-large"}, "EMBEDDING_MODEL"),
        ({"EMBEDDING_DIMENSIONS": "1536"}, "EMBEDDING_DIMENSIONS"),
    ],
)
def test_invalid_settings_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], named: str
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(SettingsError, match=named):
        load_settings()


def test_target_tokens_reach_the_chunker(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from api.providers import build_chunker
    from api.tokenizer import tiktoken_tokenizer

    monkeypatch.setenv("CHUNKING_MAX_TOKENS", "200")
    embedder = SimpleNamespace(tokenizer=tiktoken_tokenizer(), max_input_tokens=8191)
    plain = build_chunker(load_settings(), embedder)  # type: ignore[arg-type]
    monkeypatch.setenv("CHUNKING_TARGET_TOKENS", "100")
    aimed = build_chunker(load_settings(), embedder)  # type: ignore[arg-type]
    assert aimed.version == plain.version + ":target100"
    prose = "\n\n".join(f"Paragraph {i} says something about topic {i}. " * 4 for i in range(40))
    sizes = [c.token_count for c in aimed.chunk_note(prose, "T")]
    assert len(sizes) > len(plain.chunk_note(prose, "T"))
    assert max(sizes) <= 200 and sum(sizes) / len(sizes) < 130
    monkeypatch.setenv("CHUNKING_COHESIVE_CUTS", "false")
    nearest = build_chunker(load_settings(), embedder)  # type: ignore[arg-type]
    assert nearest.version == aimed.version + ":nearest-cuts"
    assert not nearest.cohesive_cuts and aimed.cohesive_cuts  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("env", "window"),
    [
        ({"CHUNKING_STRATEGY": "fixed_tokens"}, 512),  # the legacy 512/50 windows
        ({"CHUNKING_STRATEGY": "fixed_tokens", "CHUNKING_MAX_TOKENS": "200"}, 200),
        ({}, 300),
    ],
)
def test_chunk_size_default_follows_the_strategy(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], window: int
) -> None:
    """Unset CHUNKING_MAX_TOKENS means 512-token windows for fixed_tokens (docs/chunking.md) and
    300 otherwise; an explicit value wins. Checked on the chunks the app would store."""
    from types import SimpleNamespace

    from api.providers import build_chunker
    from api.tokenizer import tiktoken_tokenizer

    for var in ("CHUNKING_MAX_TOKENS", "CHUNKING_STRATEGY", "CHUNKING_TARGET_TOKENS"):
        monkeypatch.delenv(var, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = load_settings()
    assert settings.chunk_max_tokens == window
    embedder = SimpleNamespace(tokenizer=tiktoken_tokenizer(), max_input_tokens=8191)
    chunker = build_chunker(settings, embedder)  # type: ignore[arg-type]
    prose = " ".join(f"word{i % 97} and more text." for i in range(3000))
    sizes = [c.token_count for c in chunker.chunk_note(prose, "T")]
    assert max(sizes) <= window
    if settings.chunking_strategy == "fixed_tokens":
        assert sizes[:-1] == [window] * (len(sizes) - 1)
    else:  # a split section's pieces aim at 2/3 of the window (DEFAULT_TARGET_SHARE)
        assert 0.55 * window <= statistics.fmean(sizes) <= 0.8 * window


def test_default_sizes_are_the_chunker_classes_own() -> None:
    import inspect

    from api.chunking import FixedTokenChunker, MarkdownChunker, WholeNoteChunker
    from api.config import DEFAULT_MAX_TOKENS

    classes = {
        "hierarchical_markdown": MarkdownChunker,
        "fixed_tokens": FixedTokenChunker,
        "whole_note": WholeNoteChunker,
    }
    assert set(classes) == set(DEFAULT_MAX_TOKENS)
    for strategy, cls in classes.items():
        default = inspect.signature(cls).parameters["max_chunk_tokens"].default
        assert DEFAULT_MAX_TOKENS[strategy] == default, strategy


def test_cli_fails_fast_on_invalid_settings() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "api.cli", "serve"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "CHUNKING_MAX_TOKENS": "-5", "HOME": "/tmp"},
        timeout=60,
    )
    assert proc.returncode == 2
    assert "CHUNKING_MAX_TOKENS" in proc.stderr


def test_blank_values_mean_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    """`OPENAI_API_KEY=` as a `.env` template leaves it: not an OpenAI configuration (every
    note would fail to embed and search would wait for a provider that cannot answer).
    Empty variables take their defaults; keys and URLs of only spaces are unset too."""
    for var in ("OPENAI_API_KEY", "MONGODB_URL", "CHAT_MODEL", "AUTONOTE_ADMIN_TOKEN"):
        monkeypatch.setenv(var, " ")
    for var in ("EMBEDDING_DIMENSIONS", "CHUNKING_MAX_TOKENS", "AUTONOTE_PORT", "LOG_JSON"):
        monkeypatch.setenv(var, "")
    s = load_settings()
    assert s.openai_api_key is None and s.resolved_embedding_provider == "local"
    assert s.mongodb_url is None and s.chat_model is None and s.autonote_admin_token is None
    assert s.embedding_dimensions is None and s.chunking_max_tokens is None
    assert s.autonote_port == 8000 and s.log_json is None


def test_a_local_openai_compatible_server_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:11434/v1")
    monkeypatch.setenv("EMBEDDING_PROVIDER", "openai")
    monkeypatch.setenv("EMBEDDING_MODEL", "nomic-embed-text")
    monkeypatch.setenv("EMBEDDING_DIMENSIONS", "768")
    s = load_settings()
    assert s.resolved_embedding_provider == "openai" and s.embedding_dimensions == 768


def test_valid_connection_strings_pass() -> None:
    for url in (
        "mongodb://u:p%40ss@127.0.0.1:27017/?directConnection=true",
        "mongodb://a.example,b.example:27018/db?replicaSet=rs0",
        "mongodb+srv://user:pw@cluster0.abcde.mongodb.net/?retryWrites=true&w=majority",
        "mongodb://[::1]:27017/?directConnection=true",
        # Options this driver does not know (a newer driver's, a tool's): the client warns
        # and ignores them, so settings must not refuse to start.
        "mongodb://h.example/?gssapiServiceName=mongodb&someFutureOption=1",
    ):
        assert load_settings(mongodb_url=url).mongodb_url == url


def test_local_model_constants_are_the_connectors() -> None:
    from api.config import LOCAL_EMBEDDING_DIMENSIONS, LOCAL_EMBEDDING_MODEL
    from connectors.embeddings.local import DIMENSIONS, MODEL_ID

    assert (LOCAL_EMBEDDING_MODEL, LOCAL_EMBEDDING_DIMENSIONS) == (MODEL_ID, DIMENSIONS)


def test_trusted_proxies_are_addresses_or_networks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTONOTE_TRUSTED_PROXIES", " 10.0.0.0/8, 127.0.0.1 ,::1")
    assert load_settings().autonote_trusted_proxies == "10.0.0.0/8,127.0.0.1,::1"
    for bad, words in [
        ("10.0.0.0/8, proxy.internal", r"proxy\.internal"),
        ("10.0.0.5/8", r"10\.0\.0\.5/8.*host bits"),  # uvicorn would ignore it
        ("*,10.0.0.5", r"only entry"),
    ]:
        monkeypatch.setenv("AUTONOTE_TRUSTED_PROXIES", bad)
        with pytest.raises(SettingsError, match=words):
            load_settings()
    monkeypatch.setenv("AUTONOTE_TRUSTED_PROXIES", "*")
    assert load_settings().autonote_trusted_proxies == "*"
