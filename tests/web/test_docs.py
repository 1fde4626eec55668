"""`/docs` and `/redoc` name only assets this server serves (installed with the package),
so they render offline: no CDN, no web fonts, no schema validator."""

from __future__ import annotations

import re
from typing import Any

import pytest

ASSET_URL = re.compile(r"""(?:src|href|url)\s*[=:(]\s*['"]([^'"]+)['"]""")


def local_urls(html: str) -> list[str]:
    return ASSET_URL.findall(html)


@pytest.mark.parametrize(
    ("page", "assets"),
    [
        ("/docs", {"swagger-ui-bundle.js", "swagger-ui.css", "favicon.png"}),
        ("/redoc", {"redoc.standalone.js", "favicon.png"}),
    ],
)
async def test_docs_pages_load_only_local_assets(api: Any, page: str, assets: set[str]) -> None:
    resp = await api.client.get(page)
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/html")
    html = resp.text
    assert "http://" not in html and "https://" not in html and "//" + "cdn" not in html
    urls = local_urls(html)
    assert "/openapi.json" in urls
    named = {u.rsplit("/", 1)[-1] for u in urls if u.startswith("/docs-assets/")}
    assert named == assets
    for url in urls:
        assert url.startswith("/") and not url.startswith("//"), url
        served = await api.client.get(url)
        assert served.status_code == 200, url
        assert len(served.content) > 1000, url


async def test_swagger_ui_sends_nothing_to_the_public_validator(api: Any) -> None:
    html = (await api.client.get("/docs")).text
    assert '"validatorUrl": null' in html


async def test_docs_are_public_and_not_in_the_schema(api: Any) -> None:
    schema = (await api.client.get("/openapi.json")).json()
    assert not any(p.startswith(("/docs", "/redoc")) for p in schema["paths"])
    js = await api.client.get("/docs-assets/swagger-ui-bundle.js")
    assert js.headers["content-type"].split(";")[0] in ("text/javascript", "application/javascript")
