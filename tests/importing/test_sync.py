"""`autonote import` and `autonote sync` against a real server: a vault imported twice,
then a subfolder of it, then synced with one file edited and one deleted, duplicates
nothing; the edited note re-embeds only its changed section, the others embed nothing; the
deleted one is trashed. `sync --watch` (the real CLI, in its own process) follows a
create, an edit, a rename and a delete."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from api.cli import app as cli
from tests.conftest import ServedApp

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = "\n".join(
    f"## Part {i}\n\nThe {w} paragraph of the guide.\n"
    for i, w in enumerate(["first", "second", "third"])
)


def poll(what: Callable[[], Any], message: str, timeout_s: float = 60) -> Any:
    """`what()` once it is truthy; fail after `timeout_s` (a bound on failure only)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = what()
        if result:
            return result
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {message}")


class Client:
    """The served app's REST API as one user."""

    def __init__(self, served: ServedApp, key: str) -> None:
        self.served, self.key = served, key
        self.http = httpx.Client(
            base_url=served.url, headers={"Authorization": f"Bearer {key}"}, timeout=30
        )

    def notes(self, status: str = "active") -> dict[str, dict[str, Any]]:
        """Every note of the user with a key, by key (full notes)."""
        items = self.http.get(
            "/v1/notes", params={"external_id_prefix": "", "limit": 100, "status": status}
        ).json()["items"]
        return {n["external_id"]: self.http.get(f"/v1/notes/{n['id']}").json() for n in items}

    def count(self) -> int:
        active = self.http.get("/v1/notes", params={"limit": 100}).json()["items"]
        trashed = self.http.get("/v1/notes", params={"limit": 100, "status": "trashed"})
        return len(active) + len(trashed.json()["items"])

    def settled(self) -> dict[str, dict[str, Any]]:
        """The notes once every one is indexed at its version."""

        def done() -> dict[str, dict[str, Any]] | None:
            notes = self.notes()
            ok = all(
                n["index_status"] == "indexed" and n["indexed_version"] == n["version"]
                for n in notes.values()
            )
            return notes if ok else None

        return poll(done, "every note indexed")

    def tokens_embedded(self) -> float:
        text = self.http.get("/metrics").text
        found = re.findall(r"^embedding_tokens_total(?:\{[^}]*\})? (\S+)$", text, re.M)
        return sum(float(v) for v in found)

    def run(self, *args: str) -> str:
        result = CliRunner().invoke(cli, [*args, "--url", self.served.url, "--api-key", self.key])
        assert result.exit_code == 0, result.output
        return result.output


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    files = {
        ".obsidian/app.json": "{}",
        ".obsidian/snippets/x.md": "# internal",
        "guide.md": f"# Guide\n\n{SECTIONS}",
        "daily/monday.md": "# Monday\n\nBuy milk #errands\n",
        "daily/tuesday.md": "---\ncreated: 2024-03-05T08:30:00Z\n---\n# Tuesday\n\nRain.\n",
        "projects/old.md": "# Old project\n\nDone long ago.\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


KEYS = {"guide.md", "daily/monday.md", "daily/tuesday.md", "projects/old.md"}


def test_import_twice_then_a_subfolder_then_sync_an_edit_and_a_delete(
    make_settings: Any, vault: Path
) -> None:
    with ServedApp(make_settings()) as served:
        api = Client(served, served.new_user("vault"))
        first = api.run("import", str(vault))
        assert "4 imported, 0 failed, 0 skipped (4 created, 0 updated, 0 unchanged)" in first
        before = api.settled()
        assert set(before) == KEYS and before["daily/tuesday.md"]["folder"] == "daily"
        assert before["daily/tuesday.md"]["created_at"].startswith("2024-03-05T08:30:00")
        tokens = api.tokens_embedded()

        again = api.run("import", str(vault))
        assert "(0 created, 0 updated, 4 unchanged)" in again
        sub = api.run("import", str(vault / "daily"))  # keyed from the vault's root
        assert "(0 created, 0 updated, 2 unchanged)" in sub
        assert api.notes() == before and api.count() == 4
        assert api.tokens_embedded() == tokens

        (vault / "guide.md").write_text(
            f"# Guide\n\n{SECTIONS.replace('second paragraph', 'second, revised paragraph')}"
        )
        (vault / "projects" / "old.md").unlink()
        synced = api.run("sync", str(vault))
        assert "0 created, 1 updated, 2 unchanged, 0 renamed, 1 trashed, 0 failed" in synced
        assert "trashed      projects/old.md" in synced
        after = api.settled()
        assert set(after) == KEYS - {"projects/old.md"} and api.count() == 4
        guide = after["guide.md"]
        assert guide["version"] == before["guide.md"]["version"] + 1
        stats = guide["last_index_stats"]
        assert (stats["chunks"], stats["embedded"], stats["reused"]) == (3, 1, 2)
        for key in ("daily/monday.md", "daily/tuesday.md"):
            assert after[key] == before[key]  # same version, no indexing run at all
        assert api.tokens_embedded() == tokens + stats["tokens_embedded"]
        trashed = api.notes("trashed")
        assert trashed["projects/old.md"]["id"] == before["projects/old.md"]["id"]

        # The file comes back: its note is restored, not made again.
        (vault / "projects" / "old.md").write_text("# Old project\n\nDone long ago.\n")
        assert "1 updated" in api.run("sync", str(vault / "projects"))
        assert api.notes()["projects/old.md"]["id"] == before["projects/old.md"]["id"]


def test_sync_of_a_subfolder_trashes_only_under_it_and_a_move_keeps_the_note(
    make_settings: Any, vault: Path
) -> None:
    with ServedApp(make_settings()) as served:
        api = Client(served, served.new_user("vault"))
        api.run("sync", str(vault))
        before = api.notes()
        (vault / "guide.md").unlink()  # outside the folder synced next: kept
        (vault / "daily" / "monday.md").rename(vault / "daily" / "lundi.md")
        out = api.run("sync", str(vault / "daily"))
        assert "renamed      daily/monday.md -> daily/lundi.md" in out
        assert "0 trashed" in out
        after = api.notes()
        assert "guide.md" in after and "daily/monday.md" not in after
        moved = after["daily/lundi.md"]
        assert moved["id"] == before["daily/monday.md"]["id"]
        assert moved["content_md"] == before["daily/monday.md"]["content_md"]


def test_import_keys_are_validated_by_the_cli_and_the_root_can_be_given(
    make_settings: Any, tmp_path: Path
) -> None:
    folder = tmp_path / "notes" / "inner"
    folder.mkdir(parents=True)
    (folder / "a.md").write_text("# A\n\nbody")
    (folder / "bad\nname.md").write_text("# Bad")
    with ServedApp(make_settings()) as served:
        api = Client(served, served.new_user("cli"))
        root = str(tmp_path / "notes")
        args = ["import", str(folder), "--root", root, "--url", served.url, "--api-key", api.key]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 1, result.output
        assert "bad_key: the path holds a control character" in result.output
        assert set(api.notes()) == {"inner/a.md"}


@pytest.fixture
def watcher(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("OPENAI_", "MONGODB_", "AUTONOTE_", "CHUNKING_", "EMBEDDING_"))
        }
        env |= {"PYTHONPATH": str(ROOT), "LOG_JSON": "true", "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "api.cli", *args],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=(tmp_path / "watcher.err").open("w"),
            text=True,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sync_watch_follows_a_create_an_edit_a_rename_and_a_delete(
    make_settings: Any, vault: Path, watcher: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    with ServedApp(make_settings()) as served:
        api = Client(served, served.new_user("watch"))
        proc = watcher("sync", str(vault), "--watch", "--url", served.url, "--api-key", api.key)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True)
        reader.start()
        poll(lambda: any(line.startswith("watching") for line in lines), "the watcher")
        assert set(api.notes()) == KEYS

        (vault / "inbox").mkdir()
        (vault / "inbox" / "idea.md").write_text("# Idea\n\nA first thought.\n")
        idea = poll(lambda: api.notes().get("inbox/idea.md"), "the new file's note")
        (vault / "inbox" / "idea.md").write_text("# Idea\n\nA second thought.\n")
        poll(lambda: api.notes()["inbox/idea.md"]["version"] == 2, "the edit")
        (vault / "inbox" / "idea.md").rename(vault / "inbox" / "plan.md")
        moved = poll(lambda: api.notes().get("inbox/plan.md"), "the renamed file's note")
        assert moved["id"] == idea["id"] and "inbox/idea.md" not in api.notes()
        (vault / ".obsidian" / "workspace.md").write_text("# never a note")
        (vault / "inbox" / "plan.md").unlink()
        poll(lambda: "inbox/plan.md" in api.notes("trashed"), "the deleted file's note trashed")
        assert set(api.notes()) == KEYS and api.count() == 5

        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
        reader.join(timeout=60)
        # How many passes saw which file depends on how the changes were batched.
        assert lines[-1].endswith(", 1 renamed, 1 trashed, 0 failed\n"), lines[-1]
        # The mirror reports each batch; the watcher's own log lines stay out.
        assert "changes detected" not in (tmp_path / "watcher.err").read_text()
