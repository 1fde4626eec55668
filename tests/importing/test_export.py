"""`autonote export`, then `autonote import` (or `sync`) of the folder into an empty
database, gives the same notes back: titles, contents, tags and times. The export block is
recognised only when untouched; file names are safe whatever the title or key."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from api.cli import app as cli
from api.importing import convert_file
from api.importing.envelope import Envelope, read_envelope, render_envelope
from api.importing.exporter import key_path, note_path, safe_name
from tests.conftest import ServedApp, served_app

OWN_FRONT_MATTER = "---\naliases: [Kyoto 2024]\ncreated: 2020-01-01\n---\n# Trip\n\nTemples."
NOTES: list[dict[str, Any]] = [
    {"title": "Postgres backups", "content_md": "## Nightly\n\npg_dump.", "tags": ["ops"]},
    {"title": 'Plans: Q3/Q4 "draft"?', "content_md": "Tabs\there, CRLF\r\nand é ü 東京 😀."},
    {"title": "Trip", "content_md": OWN_FRONT_MATTER, "tags": ["travel", "2024"]},
    {"title": "Empty", "content_md": ""},
    {"title": ".hidden title", "content_md": "# Not hidden once exported\n"},
]
KEYED: list[dict[str, Any]] = [
    {"external_id": "daily/monday.md", "title": "Monday", "content_md": "Milk.", "tags": ["x"]},
    {"external_id": "daily/monday notes.md", "title": "Another title", "content_md": "Eggs."},
    {"external_id": "docs/report.docx", "title": "Report", "content_md": "## Results\n\nUp."},
    {"external_id": "../escape.md", "title": "Escape", "content_md": "Outside?"},
]
COMPARED = ("title", "content_md", "tags", "created_at", "updated_at")


def user(served: ServedApp) -> httpx.Client:
    key = served.new_user("backup")
    return httpx.Client(base_url=served.url, headers={"Authorization": f"Bearer {key}"})


def everything(api: httpx.Client, status: str = "active") -> list[dict[str, Any]]:
    items = api.get("/v1/notes", params={"limit": 100, "status": status}).json()["items"]
    full = [api.get(f"/v1/notes/{n['id']}").json() for n in items]
    return sorted(({k: n[k] for k in COMPARED} for n in full), key=lambda n: n["title"])


def cli_run(api: httpx.Client, *args: str) -> str:
    key = api.headers["Authorization"].removeprefix("Bearer ")
    result = CliRunner().invoke(cli, [*args, "--url", str(api.base_url), "--api-key", key])
    assert result.exit_code == 0, result.output
    return result.output


def test_export_then_import_into_an_empty_database_gives_the_same_notes(
    make_settings: Any, mongo_url: str, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    backup = tmp_path / "backup"
    with ServedApp(make_settings()) as source:
        api = user(source)
        for body in NOTES:
            assert api.post("/v1/notes", json=body).status_code == 201
        for body in KEYED:
            assert api.put("/v1/notes/by-external-id", json=body).status_code == 201
        gone = api.post("/v1/notes", json={"title": "Gone", "content_md": "old"}).json()
        api.delete(f"/v1/notes/{gone['id']}")
        edited = api.get("/v1/notes", params={"limit": 100}).json()["items"][0]
        api.patch(f"/v1/notes/{edited['id']}", json={"tags": ["edited"]})  # updated_at moves
        original = everything(api)
        out = cli_run(api, "export", str(backup), "--include-trashed")
        assert f"{len(original) + 1} exported" in out
    files = sorted(p.relative_to(backup).as_posix() for p in backup.rglob("*") if p.is_file())
    assert "daily/monday.md" in files and "docs/report.docx.md" in files
    assert any(f.startswith(".trash/Gone ") for f in files)
    assert not any(".." in f or f.startswith("escape") for f in files)

    with served_app(mongo_url, tmp_path_factory, "restore") as target:
        api = user(target)
        out = cli_run(api, "import", str(backup))
        assert f"{len(original)} imported, 0 failed" in out
        assert everything(api) == original
        assert everything(api, "trashed") == []  # .trash/ is not restored
        # sync of the same folder finds every note as it is: nothing to do.
        out = cli_run(api, "sync", str(backup))
        assert f"0 created, 0 updated, {len(original)} unchanged, 0 renamed, 0 trashed" in out


def envelope(**fields: Any) -> Envelope:
    values: dict[str, Any] = {
        "note_id": "65f0c2a1e4b0c8a1d2e3f4a5",
        "title": 'A "quoted" title: with\ttab, \\ and \u2028 and \x85',
        "tags": ["a b", "#c", "东京"],
        "created": datetime(999, 1, 2, 3, 4, 5, 678000, tzinfo=UTC),
        "updated": datetime(2024, 5, 6, 7, 8, 9, 10000, tzinfo=UTC),
        "external_id": "dir/file.md",
    }
    return Envelope(**{**values, **fields})


@pytest.mark.parametrize("fields", [{}, {"title": None, "external_id": None}, {"tags": []}])
def test_the_export_block_reads_back_exactly(fields: dict[str, Any]) -> None:
    env = envelope(**fields)
    body = "---\nown: front matter\n---\n# Body\n"
    assert read_envelope(render_envelope(env) + body) == (env, body)
    assert read_envelope(render_envelope(env)) == (env, "")


def test_an_edited_export_block_is_content_and_its_fields_still_apply() -> None:
    text = render_envelope(envelope(external_id=None))
    edited = text.replace("tags:", "status: done\ntags:")
    assert read_envelope(edited) is None
    note = convert_file("file.md", (edited + "Body").encode())
    assert note.content_md == edited + "Body" and note.title.startswith('A "quoted" title')
    assert note.tags == ["a b", "c", "东京"] and note.created_at == envelope().created
    restored = convert_file("file.md", (text + "Body").encode())
    assert restored.content_md == "Body" and restored.updated_at == envelope().updated


def test_obsidian_times_become_the_notes_times() -> None:
    note = convert_file(
        "n.md", b"---\ncreated: 2023-05-01 10:20\nupdated: 2023-06-01T00:00:00+02:00\n---\nx"
    )
    assert note.created_at == datetime(2023, 5, 1, 10, 20, tzinfo=UTC)
    assert note.updated_at == datetime(2023, 5, 31, 22, tzinfo=UTC)
    assert convert_file("n.md", b"---\ncreated: soon\n---\nx").created_at is None


def test_file_names_are_safe() -> None:
    assert safe_name('a/b\\c:d*e?f"g<h>i|j') == "a b c d e f g h i j"
    assert safe_name("..hidden. ") == "hidden" and safe_name("\x00\x1f") == "untitled"
    assert len(safe_name("é" * 300).encode()) <= 240
    assert key_path("a/b.md") == "a/b.md" and key_path("a/b.TXT") == "a/b.TXT"
    assert key_path("a/b.docx") == "a/b.docx.md"
    for bad in ("../x.md", "/abs.md", "a//b.md", "a/./b.md", ".obsidian/x.md", "a:b.md", " a.md"):
        assert key_path(bad) is None, bad
    note = {"id": "65f0c2a1e4b0c8a1d2e3f4a5", "title": "T/itle", "external_id": "../x.md"}
    assert note_path(note) == "T itle d2e3f4a5.md"
