"""Chat's numbered sections contain the passage that matched: adjacent matching chunks of
one section merge only up to a size bound, so the chunk that answers the question (at the
end of a long section) is not cut away to fit the context budget and reaches the model and
the extractive answer."""

from __future__ import annotations

import random
from typing import Any

from tests.conftest import Api
from tests.helpers import paragraph, wait_indexed

FACT = "The failover password rotation for the vault cluster happens every 90 days."


async def reaches_chat_context(
    api: Api, h: dict[str, str], title: str, content: str, question: str, fact: str
) -> dict[str, Any]:
    """Index `content` as one note; search for `question` finds `fact` among the top note's
    matching chunks, and chat's context holds it. Returns the indexed note."""
    r = await api.client.post("/v1/notes", json={"title": title, "content_md": content}, headers=h)
    note = await wait_indexed(api, h, r.json()["id"])
    search = await api.client.post("/v1/search", json={"query": question}, headers=h)
    assert any(fact in s["content"] for s in search.json()["results"][0]["matching_chunks"])
    ctx = (await api.client.post("/v1/chat/context", json={"message": question}, headers=h)).json()
    assert fact in ctx["context"], [
        (c["ref"], c["start_offset"], c["end_offset"]) for c in ctx["citations"]
    ]
    return note


async def test_the_matching_chunk_of_a_long_section_reaches_the_chat_context(api: Api) -> None:
    h = await api.new_user()
    rng = random.Random(7)
    body = "\n\n".join(paragraph(rng, 80) for _ in range(40))
    content = f"## Runbook\n\n{body}\n\n{FACT}\n"
    question = "How often does the failover password rotation of the vault cluster happen?"
    note = await reaches_chat_context(api, h, "Operations", content, question, FACT)
    assert note["chunk_count"] > 5

    chat = await api.client.post("/v1/chat", json={"message": question}, headers=h)
    assert "90 days" in chat.json()["answer"], chat.json()["answer"][:600]


# A long Japanese section: about a token per character, so 6 000 characters of it would
# fill chat's context alone.
JA_WORDS = [
    "サーバー",
    "設定",
    "ログ",
    "確認",
    "監視",
    "運用",
    "担当者",
    "手順",
    "障害",
    "対応",
    "東京",
    "大阪",
    "データベース",
    "バックアップ",
    "毎週",
    "報告",
    "会議",
    "資料",
]
JA_FACT = "サーバーの管理者パスワードは九十日ごとに必ず変更されます。"


def _ja_paragraph(rng: random.Random) -> str:
    return "サーバー" + "、".join(rng.choice(JA_WORDS) for _ in range(30)) + "。"


async def test_the_matching_passage_of_a_long_japanese_section_reaches_the_chat_context(
    api: Api,
) -> None:
    h = await api.new_user()
    rng = random.Random(5)
    body = "\n\n".join(_ja_paragraph(rng) for _ in range(45))
    content = f"## 運用手順\n\n{body}\n\n{JA_FACT}\n"
    assert len(content) < 6000  # one span under the section cap
    question = "サーバーの管理者パスワードは何日ごとに変更されますか？"
    note = await reaches_chat_context(api, h, "運用メモ", content, question, JA_FACT)
    assert note["chunk_count"] > 3
