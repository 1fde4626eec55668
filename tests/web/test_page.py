"""The page at `/` without a browser: its Content-Security-Policy, only local assets (all
served, all installed with the package), no inline script or handler."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path
from typing import Any

from api.web.page import CONTENT_SECURITY_POLICY, STATIC_DIR

ROOT = Path(__file__).resolve().parents[2]
ATTRIBUTE_URL = re.compile(r"""\b(?:src|href)\s*=\s*["']([^"']*)["']""")


def policy(header: str) -> dict[str, str]:
    return dict(d.strip().split(" ", 1) for d in header.split(";") if d.strip())


async def test_page_has_a_strict_content_security_policy(api: Any) -> None:
    resp = await api.client.get("/")
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/html")
    assert resp.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    rules = policy(CONTENT_SECURITY_POLICY)
    assert rules["default-src"] == "'self'" and rules["script-src"] == "'self'"
    assert rules["img-src"] == "'self' data:" and rules["object-src"] == "'none'"
    assert "unsafe" not in CONTENT_SECURITY_POLICY
    assert resp.headers["x-content-type-options"] == "nosniff"
    assert (await api.client.head("/")).status_code == 200


async def test_page_loads_only_its_own_files_and_no_inline_code(api: Any) -> None:
    html = (await api.client.get("/")).text
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), "inline script"
    assert not re.search(r"\son[a-z]+\s*=", html, re.I), "inline event handler"
    assert not re.search(r"\sstyle\s*=|<style", html, re.I), "inline style"
    urls = ATTRIBUTE_URL.findall(html)
    assets = [u for u in urls if not u.startswith("data:")]
    assert {"/web/app.js", "/web/app.css"} <= set(assets)
    for url in assets:
        assert url.startswith("/web/"), url
        served = await api.client.get(url)
        assert served.status_code == 200, url
        assert served.headers["content-security-policy"] == CONTENT_SECURITY_POLICY


async def test_every_module_the_page_imports_is_served_as_javascript(api: Any) -> None:
    for path in STATIC_DIR.glob("*.js"):
        for name in re.findall(r"""from\s+["']\./([^"']+)["']""", path.read_text()):
            assert (STATIC_DIR / name).is_file(), f"{path.name} imports a missing {name}"
        resp = await api.client.get(f"/web/{path.name}")
        assert resp.headers["content-type"].split(";")[0] == "text/javascript"
        assert not re.search(
            r"\binnerHTML\b|outerHTML|insertAdjacentHTML|document\.write|\beval\(", resp.text
        )


def test_the_install_carries_every_page_file() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["api.web"]
    files = [p for p in STATIC_DIR.rglob("*") if p.is_file()]
    assert files and all(p.parent == STATIC_DIR for p in files), "package-data is one level"
    for path in files:
        relative = path.relative_to(STATIC_DIR.parent).as_posix()
        assert any(fnmatch.fnmatch(relative, g) for g in globs), relative
