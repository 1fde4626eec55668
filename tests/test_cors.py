"""Browser access: AUTONOTE_CORS_ORIGINS lets listed origins call the API; preflights are
answered before authentication; with the default (none) no response carries CORS headers."""

from __future__ import annotations

from typing import Any

import pytest

from api.config import SettingsError, load_settings
from tests.conftest import running_app

ALLOWED = "https://notes.example.com"
PREFLIGHT = {
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "authorization, content-type",
}


async def test_preflight_from_an_allowed_origin_is_answered_without_a_key(
    make_settings: Any,
) -> None:
    settings = make_settings(autonote_cors_origins=f"{ALLOWED}, http://localhost:5173")
    async with running_app(settings) as api:
        resp = await api.client.options("/v1/search", headers={"Origin": ALLOWED, **PREFLIGHT})
        assert resp.status_code == 200, resp.text
        assert resp.headers["access-control-allow-origin"] == ALLOWED
        assert "POST" in resp.headers["access-control-allow-methods"]
        allowed_headers = resp.headers["access-control-allow-headers"].lower()
        assert "authorization" in allowed_headers and "content-type" in allowed_headers
        assert "access-control-allow-credentials" not in resp.headers

        # The request itself: answered with the headers, and so is its 401 without a key.
        headers = await api.new_user()
        ok = await api.client.post(
            "/v1/search", json={"query": "x"}, headers={"Origin": ALLOWED, **headers}
        )
        assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == ALLOWED
        assert "x-request-id" in ok.headers["access-control-expose-headers"].lower()
        denied = await api.client.post(
            "/v1/search", json={"query": "x"}, headers={"Origin": ALLOWED}
        )
        assert denied.status_code == 401
        assert denied.headers["access-control-allow-origin"] == ALLOWED


async def test_preflight_from_another_origin_gets_no_allow_header(make_settings: Any) -> None:
    async with running_app(make_settings(autonote_cors_origins=ALLOWED)) as api:
        resp = await api.client.options(
            "/v1/search", headers={"Origin": "https://evil.example", **PREFLIGHT}
        )
        assert resp.status_code == 400
        assert "access-control-allow-origin" not in resp.headers
        headers = await api.new_user()
        plain = await api.client.get(
            "/v1/notes", headers={"Origin": "https://evil.example", **headers}
        )
        assert plain.status_code == 200
        assert "access-control-allow-origin" not in plain.headers


async def test_default_configuration_sends_no_cors_headers(api: Any) -> None:
    resp = await api.client.options("/v1/search", headers={"Origin": ALLOWED, **PREFLIGHT})
    assert "access-control-allow-origin" not in resp.headers
    assert resp.status_code == 401  # nothing answers a preflight: the key is asked for
    headers = await api.new_user()
    plain = await api.client.get("/v1/notes", headers={"Origin": ALLOWED, **headers})
    assert plain.status_code == 200 and "access-control-allow-origin" not in plain.headers


@pytest.mark.parametrize(
    "value",
    ["notes.example.com", "https://notes.example.com/", "https://x.example/app", "*,https://a.b"],
)
def test_an_origin_that_is_not_one_names_the_variable(value: str) -> None:
    with pytest.raises(SettingsError, match="AUTONOTE_CORS_ORIGINS"):
        load_settings(autonote_cors_origins=value)


def test_origins_are_a_trimmed_list() -> None:
    settings = load_settings(autonote_cors_origins=" https://a.example ,http://localhost:3000,")
    assert settings.cors_origins == ["https://a.example", "http://localhost:3000"]
    assert load_settings(autonote_cors_origins="*").cors_origins == ["*"]
    assert load_settings().cors_origins == []
