"""The web page at `/`: one HTML file and its scripts and styles, installed with the package
(`api/web/static`), under a Content-Security-Policy that lets nothing but this server's own
files run or load (docs/web.md)."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).parent / "static"
STATIC_URL = "/web"
# No inline script or style, no other origin: a note or an answer that smuggles markup into
# the page can neither run code nor make the browser fetch anything (tests/web).
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


class _StaticAssets(StaticFiles):
    """The page's files, with the page's security headers."""

    def file_response(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        response = super().file_response(*args, **kwargs)
        response.headers.update(PAGE_HEADERS)
        return response


def install_page(app: FastAPI) -> None:
    """`GET /` (the page) and `/web/...` (its assets)."""
    app.mount(STATIC_URL, _StaticAssets(directory=STATIC_DIR), name="web")
    index = STATIC_DIR / "index.html"

    @app.head("/", include_in_schema=False)
    @app.get("/", include_in_schema=False)
    async def page() -> HTMLResponse:
        return HTMLResponse(index.read_text(encoding="utf-8"), headers=PAGE_HEADERS)
