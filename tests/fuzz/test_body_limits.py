"""Oversized bodies are refused before they are read whole — over a real socket to the app
served by uvicorn, so what is measured is what a client can make the server swallow.

- A huge declared Content-Length (10 GB) gets 413 at once: the client sends headers only.
- A chunked body with no length is cut off at the limit: the client paces its chunks and
  stops as soon as a response is readable; the bytes it managed to send before the 413 stay
  within the limit plus one socket read, far from what it was prepared to send.
The same holds on the import route (its own, larger limit) and with no API key at all.
"""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.conftest import ServedApp, served_app
from tests.fuzz.targets import record_stats

LIMIT = 100_000
IMPORT_LIMIT = 300_000
STEP = 16_384  # bytes per paced chunk
# uvicorn reads at most 64 KB past what the app consumed before pausing the transport;
# a few more steps may be in flight while the 413 travels back.
SLACK = 65_536 + 8 * STEP
MULTIPART = "multipart/form-data; boundary=b"
PREFIX = {
    "application/json": b'{"title": "big", "content_md": "',
    "multipart/form-data": b'--b\r\nContent-Disposition: form-data; name="files"; filename="a.md"'
    b"\r\nContent-Type: text/markdown\r\n\r\n",
}
SUFFIX = {"application/json": b'"}', "multipart/form-data": b"\r\n--b--\r\n"}


@pytest.fixture(scope="module")
def served(mongo_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedApp]:
    with served_app(
        mongo_url,
        tmp_path_factory,
        "limits",
        autonote_max_request_bytes=LIMIT,
        autonote_max_import_bytes=IMPORT_LIMIT,
        autonote_max_note_bytes=50_000,
    ) as app:
        yield app


@pytest.fixture(scope="module")
def key(served: ServedApp) -> str:
    return served.new_user("limits")


@dataclass
class Outcome:
    status: int
    body: bytes
    sent: int  # body bytes the client got onto the wire before the answer (or a reset)
    seconds: float


def _read_response(sock: socket.socket, deadline: float) -> tuple[int, bytes]:
    data = b""
    while b"\r\n\r\n" not in data and time.monotonic() < deadline:
        part = sock.recv(65_536)
        if not part:
            break
        data += part
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1") else 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            while len(body) < int(value) and time.monotonic() < deadline:
                part = sock.recv(65_536)
                if not part:
                    break
                body += part
    return status, body


def send_request(
    served: ServedApp,
    path: str,
    headers: dict[str, str],
    *,
    declared: int | None,
    budget: int,
    content_type: str = "application/json",
    complete: bool = False,
) -> Outcome:
    """Send headers, then up to `budget` body bytes in paced steps (chunked encoding when
    `declared` is None, else under that Content-Length), stopping at the first answer. The
    body is a well-formed start (a JSON note, or a multipart file part) followed by an
    endless string of `a`s, so nothing but its size is wrong with it."""
    sock = socket.create_connection(("127.0.0.1", served.port), timeout=30)
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Type: {content_type}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    lines.append(
        "Transfer-Encoding: chunked" if declared is None else f"Content-Length: {declared}"
    )
    start = time.monotonic()
    sent = 0
    try:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        pieces = [PREFIX[content_type.split(";")[0]], b"a" * STEP]
        while sent < budget:
            readable, _, _ = select.select([sock], [], [], 0.02)
            if readable:
                break
            piece = pieces.pop(0) if len(pieces) > 1 else pieces[0]
            frame = b"%x\r\n%s\r\n" % (len(piece), piece) if declared is None else piece
            try:
                sock.sendall(frame)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(piece)
        else:
            if complete:  # the budget is spent and nobody answered yet: end the request
                end = SUFFIX[content_type.split(";")[0]]
                sock.sendall(b"%x\r\n%s\r\n0\r\n\r\n" % (len(end), end))
        status, body = _read_response(sock, time.monotonic() + 30)
    finally:
        sock.close()
    return Outcome(status, body, sent, time.monotonic() - start)


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.mark.parametrize(
    ("path", "content_type"),
    [("/v1/notes", "application/json"), ("/v1/notes/import", MULTIPART)],
)
@pytest.mark.parametrize("with_key", [True, False], ids=["key", "no-key"])
def test_declared_huge_length_is_refused_before_any_body(
    served: ServedApp, key: str, path: str, content_type: str, with_key: bool
) -> None:
    out = send_request(
        served,
        path,
        auth(key) if with_key else {},
        declared=10 * 1024**3,
        budget=0,
        content_type=content_type,
    )
    # Answered with no body byte sent: a server waiting for the body never answers (the
    # client's read gives up after 30 s and the test fails).
    assert out.sent == 0
    assert out.status == 413, out
    assert json.loads(out.body)["error"] == "payload_too_large"


@pytest.mark.parametrize(
    ("path", "limit", "content_type"),
    [
        ("/v1/notes", LIMIT, "application/json"),
        ("/v1/notes/import", IMPORT_LIMIT, MULTIPART),
    ],
)
def test_chunked_body_is_cut_off_at_the_limit(
    served: ServedApp, key: str, path: str, limit: int, content_type: str
) -> None:
    budget = 40 * limit
    out = send_request(
        served, path, auth(key), declared=None, budget=budget, content_type=content_type
    )
    assert out.status == 413, out
    assert json.loads(out.body)["error"] == "payload_too_large"
    assert limit < out.sent <= limit + SLACK, (out.sent, limit)
    note = f"{path}: 413 after {out.sent} B sent (limit {limit} B) in {out.seconds:.2f} s"
    print("\n" + note)
    record_stats({"target": "body_limits", "note": note})


def test_chunked_body_without_a_key_is_cut_off_too(served: ServedApp) -> None:
    """No key: the answer is a 401 before the body is read (it was a 413 once the server
    had read and parsed the limit's worth: FastAPI reads a body before the auth
    dependency), and the server never swallows more than the limit."""
    out = send_request(served, "/v1/notes", {}, declared=None, budget=40 * LIMIT)
    assert out.status == 401 and out.sent <= LIMIT + SLACK, out


def test_the_server_still_serves_after_refusing(served: ServedApp, key: str) -> None:
    import httpx

    resp = httpx.post(
        f"{served.url}/v1/notes",
        json={"title": "after", "content_md": "x" * 1000},
        headers=auth(key),
        timeout=30,
    )
    assert resp.status_code == 201, resp.text


def test_an_upload_without_a_key_is_refused_before_it_is_read(served: ServedApp) -> None:
    out = send_request(
        served,
        "/v1/notes/import",
        {},
        declared=None,
        budget=IMPORT_LIMIT // 2,
        content_type=MULTIPART,
        complete=True,
    )
    assert out.status == 401, out  # the answer, once the whole body has been read
    assert out.sent < IMPORT_LIMIT // 4, f"401 only after {out.sent} bytes were read"
