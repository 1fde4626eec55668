"""`iter_import_paths`: files and folders (an Obsidian-style vault) → files to import."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from api.importing import iter_import_paths


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    """A small vault laid out like Obsidian's, with the clutter real vaults carry."""
    root = tmp_path / "vault"
    files = {
        "Inbox.md": "# Inbox\n",
        "Projects/Alpha.md": "# Alpha\n",
        "Projects/alpha-spec.docx": "",
        "Projects/Sub/Deep.markdown": "deep\n",
        "Projects/diagram.png": "",
        "Reading/paper.pdf": "",
        "Reading/page.HTML": "",
        "Reading/notes.txt": "",
        "b.md": "",
        ".obsidian/workspace.json": "{}",
        ".obsidian/snippets/x.md": "",
        ".trash/Old.md": "",
        ".git/HEAD": "",
        "Projects/.hidden.md": "",
        ".DS_Store": "",
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def rel(paths: list[Path], root: Path) -> list[str]:
    return [p.relative_to(root).as_posix() for p in paths]


def test_vault_is_walked_sorted_skipping_hidden_and_reporting_unsupported(vault: Path) -> None:
    skipped: list[tuple[str, str]] = []
    found = list(
        iter_import_paths(
            [vault], on_skip=lambda p, code: skipped.append((p.relative_to(vault).as_posix(), code))
        )
    )
    assert rel(found, vault) == [
        "Inbox.md",
        "Projects/Alpha.md",
        "Projects/Sub/Deep.markdown",
        "Projects/alpha-spec.docx",
        "Reading/notes.txt",
        "Reading/page.HTML",
        "Reading/paper.pdf",
        "b.md",
    ]
    assert skipped == [("Projects/diagram.png", "unsupported_type")]


def test_explicit_files_keep_argument_order_and_are_not_repeated(vault: Path) -> None:
    args = [vault / "b.md", vault / "Projects", vault / "Projects/Alpha.md", vault / "Inbox.md"]
    found = list(iter_import_paths(args))
    assert rel(found, vault) == [
        "b.md",
        "Projects/Alpha.md",
        "Projects/Sub/Deep.markdown",
        "Projects/alpha-spec.docx",
        "Inbox.md",
    ]


def test_explicit_hidden_file_is_used_and_unsupported_file_is_reported(vault: Path) -> None:
    skipped: list[Path] = []
    args = [vault / "Projects/.hidden.md", vault / "Projects/diagram.png"]
    found = list(iter_import_paths(args, on_skip=lambda p, _code: skipped.append(p)))
    assert found == [vault / "Projects/.hidden.md"]
    assert skipped == [vault / "Projects/diagram.png"]


def test_missing_path_fails_before_anything_is_yielded(vault: Path) -> None:
    paths = iter_import_paths([vault / "Inbox.md", vault / "nope.md"])
    with pytest.raises(FileNotFoundError, match=r"nope\.md"):
        next(paths)


def test_symlinked_directory_loop_is_not_followed(vault: Path) -> None:
    os.symlink(vault, vault / "Projects" / "loop")
    found = rel(list(iter_import_paths([vault / "Projects"])), vault)
    assert found == ["Projects/Alpha.md", "Projects/Sub/Deep.markdown", "Projects/alpha-spec.docx"]


def test_fifo_in_tree_is_not_yielded(vault: Path) -> None:
    os.mkfifo(vault / "Reading" / "pipe.md")
    found = rel(list(iter_import_paths([vault / "Reading"])), vault)
    assert found == ["Reading/notes.txt", "Reading/page.HTML", "Reading/paper.pdf"]


def test_keys_are_paths_from_the_vault_root_whatever_folder_is_given(
    vault: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vault, a subfolder of it and `.` inside it key a file alike; a folder with no
    root marker is its own root; `.autonote-root` marks a root like `.obsidian/`. No key
    tells the server the local path (`/home/alice/...`)."""
    from api.importing.keys import file_key, find_root, folder_prefix, key_problem, walked_key

    deep = vault / "Projects" / "Sub" / "Deep.markdown"
    assert find_root(vault) == vault and find_root(vault / "Projects" / "Sub") == vault
    assert file_key(deep, find_root(vault / "Projects")) == "Projects/Sub/Deep.markdown"
    monkeypatch.chdir(vault / "Projects")
    assert file_key(Path("Sub/Deep.markdown"), find_root(Path("."))) == (
        "Projects/Sub/Deep.markdown"
    )
    assert folder_prefix(Path("."), find_root(Path("."))) == "Projects/"
    assert folder_prefix(vault, vault) == "" and folder_prefix(tmp_path, vault) is None
    plain = tmp_path / "plain" / "dir"
    plain.mkdir(parents=True)
    assert find_root(plain) == plain and file_key(tmp_path / "x.md", plain) is None
    (tmp_path / "plain" / ".autonote-root").write_text("")
    assert find_root(plain) == tmp_path / "plain"
    assert not any(str(tmp_path) in file_key(f, vault) for f in iter_import_paths([vault]))
    assert key_problem("a\nb.md") and key_problem("x" * 1025) and not key_problem("é/ü.md")
    assert walked_key("Projects/Alpha.md") and not walked_key(".trash/Old.md")
    assert not walked_key("Projects/diagram.png") and not walked_key("a/.hidden/b.md")
