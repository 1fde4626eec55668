"""The keys `autonote import` and `autonote sync` give files: their path relative to a root.

The root of a folder is the nearest folder, itself or above, holding `.obsidian/` (an
Obsidian vault) or an `.autonote-root` marker, else the folder itself; `--root` overrides.
So a vault, the vault again and a subfolder of it key every file alike, and none is imported
twice. Keys use "/" and never start with "..".
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePath, PurePosixPath

from api.importing.types import SUPPORTED_EXTENSIONS
from api.schemas import CONTROL

ROOT_MARKERS = (".obsidian", ".autonote-root")
MAX_KEY_CHARS = 1024
_CONTROL = re.compile(f"[{CONTROL}]")


def find_root(folder: Path) -> Path:
    """The root of `folder` (module docstring), as an absolute path."""
    start = Path(os.path.abspath(folder))
    for candidate in (start, *start.parents):
        if (candidate / ".obsidian").is_dir() or (candidate / ".autonote-root").exists():
            return candidate
    return start


def file_key(file: Path, root: Path) -> str | None:
    """`file`'s path from `root` with "/" separators; None when it is not below `root`."""
    relative = os.path.relpath(os.path.abspath(file), os.path.abspath(root))
    parts = PurePath(relative).parts
    if not parts or parts[0] in (os.curdir, os.pardir):
        return None
    return PurePosixPath(*parts).as_posix()


def folder_prefix(folder: Path, root: Path) -> str | None:
    """The key prefix of the files below `folder` ("" for the root itself, else its path
    and "/"); None when `folder` is not `root` or below it."""
    if os.path.abspath(folder) == os.path.abspath(root):
        return ""
    key = file_key(folder, root)
    return None if key is None else key + "/"


def key_problem(key: str) -> str | None:
    """Why `key` cannot name a note (the server would refuse it), or None."""
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return "not_utf8: the file name is not valid UTF-8"
    if _CONTROL.search(key):
        return "bad_key: the path holds a control character (a line break, a tab)"
    if len(key) > MAX_KEY_CHARS:
        return f"bad_key: the path from the root is longer than {MAX_KEY_CHARS} characters"
    return None


def walked_key(key: str) -> bool:
    """Whether a folder walk could give this key: a supported file under no hidden folder
    (only such notes are trashed when their file is gone)."""
    path = PurePosixPath(key)
    hidden = any(part.startswith(".") for part in path.parts)
    return not hidden and path.suffix.lower() in SUPPORTED_EXTENSIONS
