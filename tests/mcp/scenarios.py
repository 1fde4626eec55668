"""Checks run over both transports (stdio and streamable HTTP), each through the SDK's
own client acting as Alice (`Seeded`)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.mcp.conftest import BACKUPS, Seeded, error_text, ok

READ_TOOLS = {"search_notes", "get_note", "ask", "list_recent_notes"}
WRITE_TOOLS = {"create_note", "append_to_note"}


async def call(client: Client, name: str, args: dict[str, Any]) -> Any:
    return await client.call_tool(name, args)


async def check_tools_listed(client: Client, *, writes: bool) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == (READ_TOOLS | WRITE_TOOLS if writes else READ_TOOLS)
    for tool in tools.values():
        assert tool.description and tool.input_schema["type"] == "object"
        assert tool.output_schema is not None and tool.annotations is not None
        assert tool.annotations.read_only_hint is (tool.name in READ_TOOLS)
    assert tools["search_notes"].input_schema["required"] == ["query"]


async def check_read_tools(client: Client, s: Seeded) -> None:
    found = ok(await call(client, "search_notes", {"query": "when does the nightly pg_dump run"}))
    top = found["results"][0]
    assert top["note_id"] == s.backups["id"] and top["title"] == "Postgres backups"
    assert top["score"] > 0
    section = top["matching_chunks"][0]
    assert section["heading_path"] == ["Postgres backups", "Nightly backup"]
    start, end = section["start_offset"], section["end_offset"]
    assert section["content"] == BACKUPS[start:end] and "02:00 UTC" in section["content"]
    assert section["score"] > 0

    whole = ok(await call(client, "get_note", {"note_id": s.backups["id"]}))
    assert whole["content_md"] == BACKUPS and whole["length"] == len(BACKUPS)
    assert (whole["start_offset"], whole["end_offset"]) == (0, len(BACKUPS))
    assert whole["title"] == "Postgres backups" and whole["index_status"] == "indexed"
    args = {"note_id": s.backups["id"], "start_offset": start, "end_offset": end}
    part = ok(await call(client, "get_note", args))
    assert part["content_md"] == BACKUPS[start:end] and part["length"] == len(BACKUPS)

    answer = ok(await call(client, "ask", {"question": "When does the nightly backup run?"}))
    assert "02:00 UTC" in answer["answer"] and answer["citations"]
    refs = {int(n) for n in re.findall(r"\[(\d+)\]", answer["answer"])}
    assert refs == {c["ref"] for c in answer["citations"]}
    cited = [c for c in answer["citations"] if c["note_id"] == s.backups["id"]]
    assert any("02:00" in BACKUPS[c["start_offset"] : c["end_offset"]] for c in cited)
    c = cited[0]
    args = {
        "note_id": c["note_id"],
        "start_offset": c["start_offset"],
        "end_offset": c["end_offset"],
    }
    assert (
        ok(await call(client, "get_note", args))["content_md"]
        == BACKUPS[c["start_offset"] : c["end_offset"]]
    )

    recent = ok(await call(client, "list_recent_notes", {}))
    assert [n["id"] for n in recent["items"]] == [s.garden["id"], s.backups["id"]]
    assert recent["next_cursor"] is None
    first = ok(await call(client, "list_recent_notes", {"limit": 1}))
    assert [n["id"] for n in first["items"]] == [s.garden["id"]] and first["next_cursor"]
    rest = ok(await call(client, "list_recent_notes", {"limit": 1, "cursor": first["next_cursor"]}))
    assert [n["id"] for n in rest["items"]] == [s.backups["id"]]


async def check_resources(client: Client, s: Seeded) -> None:
    listed = (await client.list_resources()).resources
    assert {r.uri for r in listed} == {f"note://{s.backups['id']}", f"note://{s.garden['id']}"}
    assert all(r.mime_type == "text/markdown" for r in listed)
    read = await client.read_resource(f"note://{s.backups['id']}")
    assert read.contents[0].text == BACKUPS  # type: ignore[union-attr]
    templates = (await client.list_resource_templates()).resource_templates
    assert [t.uri_template for t in templates] == ["note://{note_id}"]


async def check_isolation(client: Client, s: Seeded) -> None:
    """Bob's note is out of reach by id, as a resource, through search, ask and listings;
    it answers exactly as a note that does not exist."""
    bob_id = s.secret["id"]
    assert "not_found" in error_text(await call(client, "get_note", {"note_id": bob_id}))
    missing = error_text(await call(client, "get_note", {"note_id": "0" * 24}))
    assert error_text(await call(client, "get_note", {"note_id": bob_id})) == missing
    with pytest.raises(MCPError) as refused:
        await client.read_resource(f"note://{bob_id}")
    assert "not found" in str(refused.value)
    listed = {r.uri for r in (await client.list_resources()).resources}
    assert f"note://{bob_id}" not in listed
    found = ok(await call(client, "search_notes", {"query": "zebrafinch passphrase vault"}))
    assert bob_id not in {r["note_id"] for r in found["results"]}
    assert "zebrafinch" not in str(found)
    args = {"query": "zebrafinch", "filters": {"note_ids": [bob_id]}}
    assert ok(await call(client, "search_notes", args))["results"] == []
    answer = ok(await call(client, "ask", {"question": "What is the zebrafinch passphrase?"}))
    assert bob_id not in {c["note_id"] for c in answer["citations"]}
    assert "zebrafinch" not in answer["answer"].lower()
    recent = ok(await call(client, "list_recent_notes", {"limit": 100}))
    assert bob_id not in {n["id"] for n in recent["items"]}


BAD_ARGUMENTS = [
    ("get_note", {"note_id": "0" * 24}, "not_found: note not found"),
    ("get_note", {"note_id": "not-an-id"}, "invalid_arguments: note_id"),
    ("get_note", {}, "invalid_arguments: note_id: Field required"),
    ("get_note", {"note_id": "{id}", "end_offset": 10_000}, "past the end of the note"),
    ("get_note", {"note_id": "{id}", "start_offset": 9, "end_offset": 3}, "must be before"),
    ("get_note", {"note_id": "{id}", "start_offset": -1}, "invalid_arguments: start_offset"),
    ("search_notes", {"query": ""}, "invalid_arguments: query"),
    ("search_notes", {"query": "   "}, "invalid_arguments: query"),
    ("search_notes", {"query": "x" * 2001}, "at most 2000 characters"),
    ("search_notes", {"query": "x", "limit": "many"}, "invalid_arguments: limit"),
    ("search_notes", {"query": "x", "bogus": 1}, "bogus: Extra inputs are not permitted"),
    ("ask", {"question": "x" * 8001}, "at most 8000 characters"),
    ("list_recent_notes", {"cursor": "nonsense"}, "invalid_arguments: cursor"),
    ("no_such_tool", {}, "unknown tool 'no_such_tool'"),
]


async def check_bad_arguments(client: Client, s: Seeded) -> None:
    for name, args, message in BAD_ARGUMENTS:
        if args.get("note_id") == "{id}":
            args = {**args, "note_id": s.backups["id"]}
        text = error_text(await call(client, name, args))
        assert message in text, (name, args, text)
        assert "Traceback" not in text and "x" * 100 not in text
    assert len((await client.list_tools()).tools) >= len(READ_TOOLS)  # still serving


async def check_writes_refused(client: Client, s: Seeded) -> None:
    create = {"title": "From MCP", "content_md": "text"}
    append = {"note_id": s.backups["id"], "text": "more"}
    for name, args in (("create_note", create), ("append_to_note", append)):
        assert "needs write permission" in error_text(await call(client, name, args))
    recent = ok(await call(client, "list_recent_notes", {}))
    assert [n["id"] for n in recent["items"]] == [s.garden["id"], s.backups["id"]]
    assert ok(await call(client, "get_note", {"note_id": s.backups["id"]}))["version"] == 1


async def check_writes(client: Client, s: Seeded) -> str:
    """create_note and append_to_note with the write permission; returns the new note's id."""
    body = {
        "title": "From MCP",
        "content_md": "## Idea\n\nWritten by an assistant.",
        "tags": ["mcp"],
    }
    created = ok(await call(client, "create_note", body))
    assert created["title"] == "From MCP" and created["version"] == 1 and created["tags"] == ["mcp"]
    note_id = created["id"]
    appended = ok(await call(client, "append_to_note", {"note_id": note_id, "text": "A new line."}))
    assert appended["version"] == 2
    note = ok(await call(client, "get_note", {"note_id": note_id}))
    assert note["content_md"] == "## Idea\n\nWritten by an assistant.\n\nA new line."
    span = note["content_md"][appended["start_offset"] : appended["end_offset"]]
    assert span == "A new line."
    stale = {"note_id": note_id, "text": "late", "expected_version": 1}
    assert "precondition_failed" in error_text(await call(client, "append_to_note", stale))
    theirs = {"note_id": s.secret["id"], "text": "hijack"}
    assert "not_found" in error_text(await call(client, "append_to_note", theirs))
    too_big = {"title": "Huge", "content_md": "x" * 2_000_001}
    assert "note_too_large" in error_text(await call(client, "create_note", too_big))
    blank = {"title": "  ", "content_md": "x"}
    assert "invalid_arguments: title" in error_text(await call(client, "create_note", blank))
    return note_id
