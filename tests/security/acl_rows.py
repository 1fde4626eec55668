"""The access-control table: one row per route of the app, and the seeded world it runs in.

Each `Row` says how to call its route (path parameters, body) and what the route must answer
for the two callers that are allowed to reach it at all: the owner (or the admin, for admin
routes) and another, unrelated user. Every other caller — no key, malformed keys, a revoked
key, the admin token used as an API key, a user key on an admin route — gets 401 everywhere.
`PUBLIC` lists the routes that need no credentials. `tests/security/test_access_table.py`
fails when a route of the app has no row here (or a row names a route that is gone).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from tests.conftest import ADMIN_TOKEN, Api
from tests.helpers import wait_indexed

# A word no generated or fixture text contains: if it shows up in another user's response,
# that response carries the owner's data.
MARKER = "quokkavault7f3a91"
SECRET_NOTE = f"""## Vault

The {MARKER} combination is 3141-5926. Keep the {MARKER} ledger offline.

## Travel

Flights to Kyoto leave on Friday; the {MARKER} passport is in the drawer.
"""
# Bob's notes are about the same things, so an author filter applied after ranking (or not
# at all) would surface Alice's sections for Bob's questions.
BOB_NOTE = """## Vault

My own combination is written on paper. The ledger stays at home.

## Travel

Train tickets to Kyoto are booked.
"""

PUBLIC: dict[str, str] = {
    "GET /": "the web page (it asks for a key and sends it to /v1)",
    "GET /healthz": "liveness",
    "GET /readyz": "readiness",
    "GET /metrics": "Prometheus text (protected only when AUTONOTE_METRICS_TOKEN is set)",
    "GET /openapi.json": "the API description",
    "GET /docs": "Swagger UI",
    "GET /redoc": "ReDoc",
}


@dataclass
class World:
    """Everything the table's requests refer to, created through the API itself."""

    api: Api
    alice: dict[str, str]
    bob: dict[str, str]
    revoked: dict[str, str]  # Alice's own key, revoked: even the owner is locked out
    alice_user_id: str
    bob_user_id: str
    secret_id: str  # Alice's indexed note holding MARKER
    trashed_id: str  # Alice's trashed note holding MARKER
    bob_note_id: str
    spare_key_id: str  # an Alice key only the admin row may revoke
    spare_key: dict[str, str]
    scratch: dict[str, str] = field(default_factory=dict)  # row key -> Alice note to mutate


Caller = Literal["owner", "other"]


@dataclass(frozen=True)
class Call:
    """One HTTP request (relative URL)."""

    method: str
    url: str
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Row:
    """A route, how to call it as `caller`, and what the owner and another user get.

    `owner` is the status of the positive control (the data owner, or the admin token on an
    admin route); `other` is the status for another user's valid key (404 on routes that
    name one of Alice's notes; 2xx on collection routes, which then must only hold Bob's
    data; 401 on admin routes). `mutates` rows give the owner control a scratch note so the
    marked note survives the run.
    """

    method: str
    path: str
    kind: Literal["user", "admin"]
    owner: int
    other: int
    build: Callable[[World, Caller], Call]
    mutates: bool = False
    owner_sees_marker: bool = False  # positive control: the owner's answer holds her data

    @property
    def key(self) -> str:
        return f"{self.method} {self.path}"


def _note(world: World, caller: Caller, key: str) -> str:
    """The note a note-specific row targets: Alice's marked note, or for the owner's
    control on a mutating route her scratch note."""
    if caller == "owner" and key in world.scratch:
        return world.scratch[key]
    return world.secret_id


def _note_call(method: str, suffix: str = "", **kwargs: Any) -> Callable[[World, Caller], Call]:
    key = f"{method} /v1/notes/{{note_id}}{suffix}"

    def build(world: World, caller: Caller) -> Call:
        return Call(method, f"/v1/notes/{_note(world, caller, key)}{suffix}", kwargs)

    return build


def _fixed(method: str, url: str, **kwargs: Any) -> Callable[[World, Caller], Call]:
    return lambda _world, _caller: Call(method, url, kwargs)


QUESTION = f"What is the {MARKER} vault combination and when do the Kyoto flights leave?"
# Alice's marked note's key: another user's upsert of it must make that user's own note.
SECRET_KEY = "vault/secret.md"


def _upsert(_world: World, caller: Caller) -> Call:
    key = SECRET_KEY if caller == "other" else "vault/new.md"
    body = {"external_id": key, "title": "Vault", "content_md": "plain"}
    return Call("PUT", "/v1/notes/by-external-id", {"json": body})


ROWS: list[Row] = [
    Row(
        "POST",
        "/v1/notes",
        "user",
        201,
        201,
        _fixed("POST", "/v1/notes", json={"title": "Vault", "content_md": "plain", "tags": ["t"]}),
    ),
    Row(
        "POST",
        "/v1/notes/import",
        "user",
        200,
        200,
        _fixed(
            "POST",
            "/v1/notes/import",
            files=[
                ("files", ("vault.md", b"# Vault\n\nKyoto ledger combination.\n", "text/markdown"))
            ],
        ),
    ),
    Row("PUT", "/v1/notes/by-external-id", "user", 201, 201, _upsert),
    Row(
        "GET",
        "/v1/notes",
        "user",
        200,
        200,
        _fixed("GET", "/v1/notes", params={"limit": 100}),
        owner_sees_marker=True,
    ),
    Row("GET", "/v1/notes/{note_id}", "user", 200, 404, _note_call("GET"), owner_sees_marker=True),
    Row(
        "PATCH",
        "/v1/notes/{note_id}",
        "user",
        200,
        404,
        _note_call("PATCH", json={"content_md": "hijacked", "tags": ["x"]}),
        mutates=True,
    ),
    Row("DELETE", "/v1/notes/{note_id}", "user", 200, 404, _note_call("DELETE"), mutates=True),
    Row(
        "POST",
        "/v1/notes/{note_id}/restore",
        "user",
        200,
        404,
        _note_call("POST", "/restore"),
        mutates=True,
    ),
    Row(
        "POST",
        "/v1/notes/{note_id}/reindex",
        "user",
        202,
        404,
        _note_call("POST", "/reindex"),
        mutates=True,
    ),
    Row(
        "GET",
        "/v1/notes/{note_id}/chunks",
        "user",
        200,
        404,
        _note_call("GET", "/chunks"),
        owner_sees_marker=True,
    ),
    Row("GET", "/v1/me", "user", 200, 200, _fixed("GET", "/v1/me")),
    Row("GET", "/v1/index/status", "user", 200, 200, _fixed("GET", "/v1/index/status")),
    Row(
        "POST",
        "/v1/search",
        "user",
        200,
        200,
        _fixed("POST", "/v1/search", json={"query": QUESTION, "limit": 50, "chunks_per_note": 20}),
        owner_sees_marker=True,
    ),
    Row(
        "POST",
        "/v1/chat",
        "user",
        200,
        200,
        _fixed("POST", "/v1/chat", json={"message": QUESTION}),
        owner_sees_marker=True,
    ),
    Row(
        "POST",
        "/v1/chat/context",
        "user",
        200,
        200,
        _fixed("POST", "/v1/chat/context", json={"message": QUESTION}),
        owner_sees_marker=True,
    ),
    Row(
        "POST",
        "/v1/chat/completions",
        "user",
        200,
        200,
        _fixed(
            "POST",
            "/v1/chat/completions",
            json={"model": "autonote", "messages": [{"role": "user", "content": QUESTION}]},
        ),
        owner_sees_marker=True,
    ),
    Row("GET", "/v1/models", "user", 200, 200, _fixed("GET", "/v1/models")),
    Row(
        "POST",
        "/v1/admin/users",
        "admin",
        201,
        401,
        _fixed("POST", "/v1/admin/users", json={"name": "created-by-table"}),
    ),
    Row(
        "POST",
        "/v1/admin/users/{user_id}/keys",
        "admin",
        201,
        401,
        lambda w, _c: Call("POST", f"/v1/admin/users/{w.alice_user_id}/keys"),
    ),
    Row(
        "DELETE",
        "/v1/admin/keys/{key_id}",
        "admin",
        204,
        401,
        lambda w, _c: Call("DELETE", f"/v1/admin/keys/{w.spare_key_id}"),
    ),
]

# Headers that must never authenticate anything (the value after the scheme is checked).
MALFORMED: dict[str, dict[str, str]] = {
    "no scheme": {"Authorization": "an_" + "x" * 43},
    "basic scheme": {"Authorization": "Basic YWxpY2U6cGFzc3dvcmQ="},
    "empty bearer": {"Authorization": "Bearer"},
    "oversized": {"Authorization": "Bearer an_" + "y" * 400},
    "unknown key": {"Authorization": "Bearer an_" + "z" * 43},
}
ADMIN_HEADERS = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


async def _create(api: Api, headers: dict[str, str], title: str, content: str) -> str:
    resp = await api.client.post(
        "/v1/notes",
        json={"title": title, "content_md": content, "tags": [MARKER]},
        headers=headers,
    )
    assert resp.status_code == 201, resp.text
    return str(resp.json()["id"])


async def _admin(api: Api, method: str, url: str, **kwargs: Any) -> dict[str, Any]:
    resp = await api.client.request(method, url, headers=ADMIN_HEADERS, **kwargs)
    assert resp.status_code == 201, resp.text
    return dict(resp.json())


async def seed_world(api: Api) -> World:
    """Alice (marked notes, a revoked and a spare key) and Bob (similar notes of his own)."""
    alice_created = await _admin(api, "POST", "/v1/admin/users", json={"name": "alice"})
    bob_created = await _admin(api, "POST", "/v1/admin/users", json={"name": "bob"})
    alice = {"Authorization": f"Bearer {alice_created['api_key']}"}
    bob = {"Authorization": f"Bearer {bob_created['api_key']}"}
    user_url = f"/v1/admin/users/{alice_created['user_id']}/keys"
    doomed = await _admin(api, "POST", user_url)
    revoke = await api.client.delete(f"/v1/admin/keys/{doomed['key_id']}", headers=ADMIN_HEADERS)
    assert revoke.status_code == 204
    spare = await _admin(api, "POST", user_url)
    secret_id = await _create(api, alice, f"Alice {MARKER} vault", SECRET_NOTE)
    keyed = await api.client.patch(
        f"/v1/notes/{secret_id}", json={"external_id": SECRET_KEY}, headers=alice
    )
    assert keyed.status_code == 200, keyed.text
    trashed_id = await _create(api, alice, f"Old {MARKER} vault", SECRET_NOTE)
    bob_note_id = (
        await api.client.post(
            "/v1/notes", json={"title": "Bob vault", "content_md": BOB_NOTE}, headers=bob
        )
    ).json()["id"]
    world = World(
        api=api,
        alice=alice,
        bob=bob,
        revoked={"Authorization": f"Bearer {doomed['api_key']}"},
        alice_user_id=alice_created["user_id"],
        bob_user_id=bob_created["user_id"],
        secret_id=secret_id,
        trashed_id=trashed_id,
        bob_note_id=bob_note_id,
        spare_key_id=spare["key_id"],
        spare_key={"Authorization": f"Bearer {spare['api_key']}"},
    )
    for row in ROWS:
        if row.mutates:
            world.scratch[row.key] = await _create(api, alice, f"Scratch {MARKER}", SECRET_NOTE)
    for note_id in (secret_id, trashed_id, *world.scratch.values()):
        await wait_indexed(api, alice, note_id)
    await wait_indexed(api, bob, bob_note_id)
    trash = await api.client.delete(f"/v1/notes/{trashed_id}", headers=alice)
    assert trash.status_code == 200
    return world
