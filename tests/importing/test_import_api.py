"""POST /v1/notes/import and `autonote import`: real HTML pages and DOCX files become notes
whose chunks carry the documents' heading breadcrumbs; bad files fail alone."""

from __future__ import annotations

import errno
import io
import os
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from docx import Document
from typer.testing import CliRunner

from api.cli import app as cli
from tests.conftest import Api, ServedApp
from tests.helpers import raw_post, wait_indexed

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "importing"

MD = b"""---
title: Garden plan
tags: [garden, spring]
---
# Ignored as title

## Tomatoes

Plant after the last frost.
"""


def make_docx() -> bytes:
    doc = Document()
    doc.add_paragraph("Quarterly review", style="Title")
    doc.add_paragraph("Revenue", style="Heading 1")
    doc.add_paragraph("Revenue grew in every region.", style="Normal")
    doc.add_paragraph("Costs", style="Heading 2")
    table = doc.add_table(rows=2, cols=2)
    for (r, c), text in {(0, 0): "Item", (0, 1): "EUR", (1, 0): "Cloud", (1, 1): "120"}.items():
        table.cell(r, c).text = text
    buf = io.BytesIO()
    doc.save(buf)
    return buf.getvalue()


async def test_import_mixed_files(api: Api) -> None:
    h = await api.new_user()
    html = (FIXTURES / "rust-book-data-types.html").read_bytes()
    files = [
        ("files", ("garden.md", MD, "text/markdown")),
        ("files", ("data-types.html", html, "text/html")),
        ("files", ("review.docx", make_docx(), "application/octet-stream")),
        ("files", ("broken.docx", b"PK not really a zip", "application/octet-stream")),
        ("files", ("virus.exe", b"MZ...", "application/octet-stream")),
        ("files", ("empty.txt", b"", "text/plain")),
    ]
    r = await api.client.post(
        "/v1/notes/import", files=files, data={"tags": ["imported"]}, headers=h
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert [i["filename"] for i in body["imported"]] == [
        "garden.md",
        "data-types.html",
        "review.docx",
    ]
    assert {e["filename"]: e["error"] for e in body["errors"]} == {
        "broken.docx": "corrupt_file",
        "virus.exe": "unsupported_type",
        "empty.txt": "empty",
    }
    notes = {i["filename"]: i["note"] for i in body["imported"]}
    assert notes["garden.md"]["title"] == "Garden plan"
    assert notes["garden.md"]["tags"] == ["garden", "spring", "imported"]
    assert notes["review.docx"]["title"] == "Quarterly review"

    for filename, expected in (
        ("garden.md", ["Garden plan", "Ignored as title", "Tomatoes"]),
        ("review.docx", ["Quarterly review", "Revenue", "Costs"]),
    ):
        note_id = notes[filename]["id"]
        await wait_indexed(api, h, note_id)
        chunks = (await api.client.get(f"/v1/notes/{note_id}/chunks", headers=h)).json()["items"]
        assert chunks[-1]["heading_path"] == expected, filename
    docx_note = (await api.client.get(f"/v1/notes/{notes['review.docx']['id']}", headers=h)).json()
    assert (
        "| Item | EUR |" in docx_note["content_md"] and "| --- | --- |" in docx_note["content_md"]
    )
    rust = notes["data-types.html"]["id"]
    await wait_indexed(api, h, rust)
    paths = {
        tuple(c["heading_path"][1:])
        for c in (await api.client.get(f"/v1/notes/{rust}/chunks", headers=h)).json()["items"]
    }
    assert ("Data Types", "Scalar Types", "Integer Types") in paths


async def test_import_rejects_oversized_upload(make_settings: Any) -> None:
    from tests.conftest import running_app

    async with running_app(make_settings(autonote_max_import_bytes=50_000)) as api:
        h = await api.new_user()
        r = await api.client.post(
            "/v1/notes/import",
            headers=h,
            files=[("files", ("big.md", b"x" * 100_000, "text/markdown"))],
        )
        assert r.status_code == 413
        assert await api.container.db.notes.count_documents({}) == 0


async def test_a_file_over_the_per_file_limit_fails_alone(make_settings: Any) -> None:
    """Each file succeeds or fails on its own: one over the per-file limit is listed as
    `too_large` and the others are imported (the whole request used to fail with 413)."""
    from tests.conftest import running_app

    async with running_app(make_settings(autonote_max_import_file_bytes=2000)) as api:
        h = await api.new_user()
        r = await api.client.post(
            "/v1/notes/import",
            headers=h,
            files=[
                ("files", ("ok.md", b"# Fits\n\nsmall", "text/markdown")),
                ("files", ("big.md", b"x" * 3000, "text/markdown")),
            ],
        )
        assert r.status_code == 200, r.text
        body = r.json()
        assert [i["filename"] for i in body["imported"]] == ["ok.md"]
        assert [(e["filename"], e["error"]) for e in body["errors"]] == [("big.md", "too_large")]
        assert "2000 bytes" in body["errors"][0]["detail"]
        assert await api.container.db.notes.count_documents({}) == 1


async def test_derived_titles_and_tags_are_cleaned_not_fatal(api: Api) -> None:
    """A title or tag the importer derives (H1, front matter) with control characters is
    cleaned; such files used to fail with a raw regex in `detail`."""
    h = await api.new_user()
    files = [
        ("del.md", b"# a\x7fb\n\ntext"),
        ("nul.md", b"# N\x00ul\n\ntext"),
        ("tags.md", b'---\ntags: ["a\\x01b", ok]\n---\ntext'),
    ]
    r = await api.client.post(
        "/v1/notes/import",
        headers=h,
        files=[("files", (name, data, "text/markdown")) for name, data in files],
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["errors"] == []
    got = {i["filename"]: (i["note"]["title"], i["note"]["tags"]) for i in body["imported"]}
    assert got == {
        "del.md": ("a b", []),
        "nul.md": ("N ul", []),
        "tags.md": ("tags", ["a b", "ok"]),
    }


async def test_a_files_own_tags_are_fitted_to_the_limits_not_fatal(api: Api) -> None:
    """Tags a file carries (a 100-character front-matter tag, 60 Obsidian `#tags`) are cut
    to the configured length and count (64, 50); the request's own tags always stay.
    Such files used to fail as a whole."""
    h = await api.new_user()
    long_tag = "x" * 100
    files = [
        ("long.md", f"---\ntags: [{long_tag}, ok]\n---\n\nBody.\n".encode()),
        ("daily.md", ("# Daily\n\n" + " ".join(f"#topic{i}" for i in range(60))).encode()),
    ]
    r = await api.client.post(
        "/v1/notes/import",
        files=[("files", (name, data, "text/markdown")) for name, data in files],
        data={"tags": ["mine"]},
        headers=h,
    )
    assert r.status_code == 200, r.text
    assert r.json()["errors"] == []
    tags = {i["filename"]: i["note"]["tags"] for i in r.json()["imported"]}
    assert tags["long.md"] == ["x" * 64, "ok", "mine"]
    assert tags["daily.md"] == [f"topic{i}" for i in range(49)] + ["mine"]
    # ... and each file says what was changed (it happened without a word)
    warnings = {i["filename"]: i["warnings"] for i in r.json()["imported"]}
    assert len(warnings["long.md"]) == 1 and "cut to 64 characters" in warnings["long.md"][0]
    assert len(warnings["daily.md"]) == 1
    assert warnings["daily.md"][0].startswith("11 of the file's tags dropped: at most 50")
    assert "'topic49'" in warnings["daily.md"][0]


async def test_tag_fitting_compares_the_requests_tags_as_stored(make_settings: Any) -> None:
    """With room for 3 tags, a file's [a, b, c] and the request's " a " fit exactly (the
    request's tag was compared untrimmed, so c was dropped)."""
    from tests.conftest import running_app

    async with running_app(make_settings(autonote_max_tags=3)) as api:
        h = await api.new_user()
        r = await api.client.post(
            "/v1/notes/import",
            files=[("files", ("t.md", b"---\ntags: [a, b, c]\n---\nbody", "text/markdown"))],
            data={"tags": [" a "]},
            headers=h,
        )
        assert r.status_code == 200, r.text
        assert sorted(r.json()["imported"][0]["note"]["tags"]) == ["a", "b", "c"]
        assert r.json()["imported"][0]["warnings"] == []


def test_a_derived_title_falls_back_to_the_file_name_then_untitled() -> None:
    from api.importing.service import one_line

    assert one_line("tab\tand\x01name.md", 500) == "tab and name.md"
    assert one_line("\x01", 500) is None and one_line("\ufeff", 500) is None
    assert one_line("  x " + "y" * 600, 500) == "x " + "y" * 498


def test_cli_import_of_a_vault(make_settings: Any, tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    (vault / ".obsidian").mkdir(parents=True)
    (vault / ".obsidian" / "workspace.md").write_text("# internal")
    (vault / "daily").mkdir()
    (vault / "daily" / "monday.md").write_text("# Monday\n\n## Todo\n\nBuy milk #errands\n")
    (vault / "guide.html").write_bytes((FIXTURES / "libffi-the-basics.html").read_bytes())
    (vault / "image.png").write_bytes(b"\x89PNG")
    shutil.copy(FIXTURES / "field-guide.docx", vault / "field-guide.docx")
    with ServedApp(make_settings()) as served:
        key = served.new_user("importer")
        result = CliRunner().invoke(
            cli, ["import", str(vault), "--url", served.url, "--api-key", key, "--tag", "vault"]
        )
        assert result.exit_code == 0, result.output
        assert "3 imported, 0 failed, 1 skipped (3 created" in result.output
        assert "workspace.md" not in result.output
        # Names are the files' keys, their paths in the vault, not the local ones (which
        # told the server the user's directory layout).
        assert "created      daily/monday.md -> " in result.output
        imported = [line for line in result.output.splitlines() if line.startswith("created")]
        assert len(imported) == 3 and not any(str(tmp_path) in line for line in imported)
        listing = httpx.get(
            f"{served.url}/v1/notes",
            params={"tag": "vault"},
            headers={"Authorization": f"Bearer {key}"},
        ).json()
        titles = {n["title"] for n in listing["items"]}
        assert "Monday" in titles and len(titles) == 3
        bad = CliRunner().invoke(
            cli, ["import", str(vault / "image.png"), "--url", served.url, "--api-key", key]
        )
        assert bad.exit_code == 0 and "0 imported" in bad.output


async def test_import_rejects_bad_fields_before_storing_anything(api: Api) -> None:
    """The form's own fields are the request's: an unknown one, a part of the wrong kind or
    a bad tag is a 422 for the whole request (it was a 200 listing every file as failed,
    or, for an unknown field, an import that silently ignored it)."""
    h = await api.new_user()
    md = ("files", ("t.md", b"# T\n\nBody.", "text/markdown"))
    cases: list[tuple[list[Any], dict[str, Any], str]] = [
        ([md], {"tag": "ops"}, "unknown multipart field 'tag'"),
        ([md], {"tags": "a\x00b"}, "tags"),
        ([md], {"tags": "   "}, "tags"),
        ([md], {"tags": "x" * 100}, "longer than 64"),
        ([md], {"tags": [f"t{i}" for i in range(51)]}, "too many tags"),
        ([md, ("tags", ("t.txt", b"ops", "text/plain"))], {}, "must be text fields"),
    ]
    for files, data, detail in cases:
        r = await api.client.post("/v1/notes/import", files=files, data=data, headers=h)
        assert r.status_code == 422, (data, r.text)
        assert r.json()["error"] == "validation_error"
        assert detail in str(r.json()["detail"]), r.json()
    text_files = _multipart([(b'form-data; name="files"', b"not a file")])
    r = await api.client.post(
        "/v1/notes/import",
        content=text_files,
        headers={**h, "Content-Type": "multipart/form-data; boundary=B0undary"},
    )
    assert r.status_code == 422 and "must be files" in str(r.json()["detail"]), r.text
    assert await api.container.db.notes.count_documents({}) == 0
    ok = await api.client.post("/v1/notes/import", files=[md], data={"tags": " ops "}, headers=h)
    assert ok.status_code == 200, ok.text
    assert ok.json()["imported"][0]["note"]["tags"] == ["ops"]


def _multipart(parts: list[tuple[bytes, bytes]], boundary: bytes = b"B0undary") -> bytes:
    """A raw multipart/form-data body from (Content-Disposition value, content) pairs."""
    out = b""
    for disposition, content in parts:
        out += b"--" + boundary + b"\r\nContent-Disposition: " + disposition + b"\r\n\r\n"
        out += content + b"\r\n"
    return out + b"--" + boundary + b"--\r\n"


async def test_import_refuses_text_that_is_not_utf8_and_non_multipart_bodies(api: Api) -> None:
    """Starlette decodes invalid UTF-8 in a text field or a file name as Latin-1: the tag
    bytes \\xff\\xfe were stored as "ÿþ". Now a 400, and nothing is stored."""
    h = await api.new_user()
    headers = {**h, "Content-Type": "multipart/form-data; boundary=B0undary"}
    good_file = (b'form-data; name="files"; filename="a.md"', b"# A\n\nbody")
    cases = {
        "the field 'tags'": [good_file, (b'form-data; name="tags"', b"\xff\xfe")],
        "a file name": [(b'form-data; name="files"; filename="\xff\xfe.md"', b"# A\n\nbody")],
        "a field name": [good_file, (b'form-data; name="t\xffgs"', b"x")],
    }
    for what, parts in cases.items():
        r = await api.client.post("/v1/notes/import", content=_multipart(parts), headers=headers)
        assert r.status_code == 400, (what, r.text)
        assert r.json()["error"] == "bad_request"
        assert f"{what} is not valid utf-8" in r.json()["detail"], r.json()
    as_json = await api.client.post("/v1/notes/import", json={"files": []}, headers=h)
    assert as_json.status_code == 415 and as_json.json()["error"] == "unsupported_media_type"
    assert await api.container.db.notes.count_documents({}) == 0
    fine = [good_file, (b'form-data; name="tags"', "café".encode())]
    ok = await api.client.post("/v1/notes/import", content=_multipart(fine), headers=headers)
    assert ok.status_code == 200, ok.text
    assert ok.json()["imported"][0]["note"]["tags"] == ["café"]


def test_cli_import_fits_the_servers_request_limit(make_settings: Any, tmp_path: Path) -> None:
    """Three 40 KB files against a 100 KB request limit: the CLI sent them in one request
    and stopped at the 413 with nothing imported. It now sends smaller
    batches; a file too big for any request fails alone, and the run goes on."""
    vault = tmp_path / "vault"
    vault.mkdir()
    for name in ("a", "b", "c"):
        (vault / f"{name}.md").write_text(f"# {name}\n\n" + "word " * 8_000)
    (vault / "d.md").write_text("# d\n\n" + "word " * 30_000)  # 150 KB
    settings = make_settings(
        autonote_max_import_bytes=100_000, autonote_max_import_file_bytes=200_000
    )
    with ServedApp(settings) as served:
        key = served.new_user("cli")
        result = CliRunner().invoke(
            cli, ["import", str(vault), "--url", served.url, "--api-key", key]
        )
        listing = httpx.get(
            f"{served.url}/v1/notes", headers={"Authorization": f"Bearer {key}"}
        ).json()
    assert result.exit_code == 1, result.output
    assert {n["title"] for n in listing["items"]} == {"a", "b", "c"}
    assert "d.md: HTTP 413" in result.output and "3 imported, 1 failed" in result.output


def test_cli_import_fits_the_servers_file_count_limit(make_settings: Any, tmp_path: Path) -> None:
    """A server allowing 2 files per request answered the CLI's batch of 3 with a 400
    'Too many files' and nothing was imported: it is a 413 now, which
    the CLI answers with smaller batches."""
    vault = tmp_path / "vault"
    vault.mkdir()
    for name in ("a", "b", "c"):
        (vault / f"{name}.md").write_text(f"# {name}\n\nbody")
    with ServedApp(make_settings(autonote_max_import_files=2)) as served:
        key = served.new_user("cli")
        files = [("files", (f"{n}.md", b"# x")) for n in "abc"]
        direct = httpx.post(
            f"{served.url}/v1/notes/import",
            files=files,
            headers={"Authorization": f"Bearer {key}"},
        )
        result = CliRunner().invoke(
            cli, ["import", str(vault), "--url", served.url, "--api-key", key]
        )
    assert direct.status_code == 413, direct.text
    assert direct.json()["error"] == "payload_too_large" and "at most 2" in direct.json()["detail"]
    assert result.exit_code == 0 and "3 imported, 0 failed" in result.output, result.output


def deny_reading(monkeypatch: pytest.MonkeyPatch, files: set[Path], folders: set[Path]) -> None:
    """Reading `files` and listing `folders` fail with EACCES, as for a user without
    permission (a chmod does not stop root, and another user may not reach the clone)."""
    read_bytes, scandir = Path.read_bytes, os.scandir

    def denied(path: object) -> PermissionError:
        return PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))

    def guarded_read_bytes(self: Path) -> bytes:
        if self in files:
            raise denied(self)
        return read_bytes(self)

    def guarded_scandir(path: Any = ".") -> Any:
        if Path(os.fsdecode(path)) in folders:
            raise denied(os.fsdecode(path))
        return scandir(path)

    monkeypatch.setattr(Path, "read_bytes", guarded_read_bytes)
    monkeypatch.setattr(os, "scandir", guarded_scandir)


def test_cli_import_reports_what_it_cannot_read(
    make_settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unreadable file crashed the CLI (its batch lost); an unreadable folder was
    skipped without a word and the run exited 0."""
    vault = tmp_path / "vault"
    (vault / "locked").mkdir(parents=True)
    (vault / "good.md").write_text("# Good\n\nreadable")
    (vault / "secret.md").write_text("# Secret")
    (vault / "locked" / "x.md").write_text("# Locked")
    deny_reading(monkeypatch, files={vault / "secret.md"}, folders={vault / "locked"})
    with ServedApp(make_settings()) as served:
        key = served.new_user("cli")
        result = CliRunner().invoke(
            cli, ["import", str(vault), "--url", served.url, "--api-key", key]
        )
        listing = httpx.get(
            f"{served.url}/v1/notes", headers={"Authorization": f"Bearer {key}"}
        ).json()
    # An exit, not a crash: CliRunner holds any other exception the command raised.
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1, result.output
    assert f"failed       {vault / 'secret.md'}: unreadable" in result.output
    assert f"skipped      {vault / 'locked'} (unreadable)" in result.output
    assert "1 imported, 2 failed" in result.output
    assert {n["title"] for n in listing["items"]} == {"Good"}


async def test_a_users_second_import_waits_with_its_body_unread(api: Api) -> None:
    """Each import request held all its files in memory while they waited for conversion:
    one user's 12 concurrent uploads of 50 MB held 1.2 GB. A user's
    imports now run one at a time, the next one's body unread until its turn; another
    user's import does not wait."""
    import asyncio

    alice, bob = await api.new_user("alice"), await api.new_user("bob")
    imports = api.container.imports
    gate, entered = asyncio.Event(), asyncio.Event()
    real = imports.import_files

    async def gated(user: Any, files: Any, **kwargs: Any) -> Any:
        if files[0][0] == "first.md":
            entered.set()
            await gate.wait()
        return await real(user, files, **kwargs)

    imports.import_files = gated
    reads: list[str] = []
    boundary = b"B0undary"

    async def post(headers: dict[str, str], name: str) -> tuple[int, bytes]:
        body = _multipart([(f'form-data; name="files"; filename="{name}"'.encode(), b"x\n")])
        response = await raw_post(
            api.app,
            "/v1/notes/import",
            headers,
            body,
            content_type=b"multipart/form-data; boundary=" + boundary,
            on_read=lambda: reads.append(name),
        )
        return response.status, response.body

    first = asyncio.create_task(post(alice, "first.md"))
    await asyncio.wait_for(entered.wait(), 10)
    second = asyncio.create_task(post(alice, "second.md"))
    assert (await post(bob, "bobs.md"))[0] == 200  # another user's import goes through
    await asyncio.sleep(0.2)
    assert "second.md" not in reads  # alice's second request waits, its body unread
    gate.set()
    assert (await first)[0] == 200 and (await second)[0] == 200
    assert reads.count("second.md") >= 1
    listed = (await api.client.get("/v1/notes", headers=alice)).json()["items"]
    assert {n["title"] for n in listed} == {"first", "second"}


def test_cli_import_reports_bad_names_and_big_files_and_waits_out_429(
    make_settings: Any, tmp_path: Path
) -> None:
    """A file name that is not UTF-8 stopped the run with a traceback; a file over the
    per-file limit was read whole (1.5 GB, 4.7 GB of memory) to be refused; a 429 failed
    its batch. Now the first two fail alone, before any upload, and a
    rate-limited batch is sent again after its Retry-After."""
    vault = tmp_path / "vault"
    vault.mkdir()
    for i in range(63):
        (vault / f"n{i:02}.md").write_text(f"# Note {i}\n\nbody {i}")
    (Path(os.fsdecode(bytes(vault) + b"/caf\xe9.md"))).write_text("# Latin-1 name")
    with open(vault / "huge.md", "wb") as big:
        big.truncate(5_000_000)  # sparse: over the limit below, never read
    with ServedApp(make_settings(autonote_rate_limit_per_minute=60)) as served:
        key = served.new_user("cli")
        result = CliRunner().invoke(
            cli,
            ["import", str(vault), "--url", served.url, "--api-key", key, "--batch", "1"],
            env={"AUTONOTE_MAX_IMPORT_FILE_BYTES": "1000000"},
        )
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code == 1, result.output
    assert "63 imported, 2 failed" in result.output, result.output[-800:]
    assert "not_utf8: the file name is not valid UTF-8" in result.output
    assert "huge.md: too_large: 5000000 bytes" in result.output
    assert "HTTP 429" not in result.output
