"""`/docs` (Swagger UI) and `/redoc` from the assets the `fastapi-offline` package installs:
the pages render with no network (docs/decisions/0010-offline-web-assets.md)."""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

DOCS_ASSETS = "/docs-assets"
_ASSETS_DIR = Path(fastapi_offline.__file__).parent / "static"
# Swagger UI would otherwise send the schema to its public validator for a badge.
SWAGGER_PARAMETERS = {"validatorUrl": None}
# Nothing but this server: ReDoc's bundle shows a logo from its vendor's CDN, which this
# blocks before any request is made. Both pages start with an inline script or style.
DOCS_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; object-src 'none'; "
    "base-uri 'none'; frame-ancestors 'none'"
)


def _local_only(response: HTMLResponse) -> HTMLResponse:
    response.headers["Content-Security-Policy"] = DOCS_CSP
    return response


def install_docs(app: FastAPI) -> None:
    """Serve the docs pages; `app` is built with `docs_url=None, redoc_url=None`."""
    app.mount(DOCS_ASSETS, StaticFiles(directory=_ASSETS_DIR), name="docs-assets")
    title = app.title

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return _local_only(
            get_swagger_ui_html(
                openapi_url=f"{root}{app.openapi_url}",
                title=f"{title} - Swagger UI",
                swagger_js_url=f"{root}{DOCS_ASSETS}/swagger-ui-bundle.js",
                swagger_css_url=f"{root}{DOCS_ASSETS}/swagger-ui.css",
                swagger_favicon_url=f"{root}{DOCS_ASSETS}/favicon.png",
                swagger_ui_parameters={**(app.swagger_ui_parameters or {}), **SWAGGER_PARAMETERS},
            )
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return _local_only(
            get_redoc_html(
                openapi_url=f"{root}{app.openapi_url}",
                title=f"{title} - ReDoc",
                redoc_js_url=f"{root}{DOCS_ASSETS}/redoc.standalone.js",
                redoc_favicon_url=f"{root}{DOCS_ASSETS}/favicon.png",
                with_google_fonts=False,
            )
        )
