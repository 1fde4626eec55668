"""Pasted images as `data:` URIs: kept in the chunks, not embedded (`data_uri.py`).

Before, a note with one pasted 300 KB screenshot became ~730 chunks of base64, every one
embedded; these tests fail on that code (chunk counts, embedding text).
"""

from __future__ import annotations

import base64
import random
import re
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.chunking import FixedTokenChunker, MarkdownChunker, WholeNoteChunker
from api.chunking import data_uri as data_uri_module
from api.chunking.data_uri import MAX_PREFIX_CHARS, MIN_PAYLOAD_CHARS, mask_data_uris
from tests.chunking.chunk_invariants import check_chunks, minilm_tokenizer, payload_spans


def payload(n_bytes: int, seed: int) -> str:
    return base64.b64encode(random.Random(seed).randbytes(n_bytes)).decode()


IMAGE = payload(225_000, 1)  # 300 000 base64 characters
ICON = payload(150, 2)  # 200 characters: below MIN_PAYLOAD_CHARS, left alone
NOTE = (
    "# Trip\n\nThe route we took:\n\n"
    f"![route map](data:image/png;base64,{IMAGE})\n\n"
    "Then we walked to the museum.\n\n## Day 2\n\n"
    f'<img alt="receipt" src="data:image/jpeg;base64,{IMAGE[:5000]}">\n\n'
    f"Rain all day. ![icon](data:image/gif;base64,{ICON})\n"
)


def chunk(chunker: MarkdownChunker, text: str = NOTE) -> list:
    chunks = chunker.chunk_note(text, "Kyoto")
    check_chunks(chunks, text, "Kyoto", chunker)
    return chunks


@pytest.mark.parametrize("tokenizer", ["cl100k", "minilm"])
def test_a_pasted_image_is_one_chunk_with_its_section_not_hundreds(tokenizer: str) -> None:
    # MiniLM's pre-tokenizer cut base64 at "+", "/" and "=": ~740 chunks before.
    minilm = {"tokenizer": minilm_tokenizer(), "max_input_tokens": 256}
    chunks = chunk(MarkdownChunker(**(minilm if tokenizer == "minilm" else {})))
    assert [c.heading_path for c in chunks] == [["Kyoto", "Trip"], ["Kyoto", "Trip", "Day 2"]]
    first, second = chunks
    # Stored whole (an exact slice of the note, payload included) ...
    assert first.content_md == NOTE[first.start_offset : first.end_offset]
    assert IMAGE in first.content_md and first.content_md.endswith("the museum.")
    # ... embedded as its place and alt text: the payload costs one character.
    assert IMAGE[:300] not in first.embedding_text
    assert "![route map](data:image/png;base64," in first.embedding_text
    assert first.token_count < 40 and len(first.embedding_text) < 200
    assert IMAGE[:300] not in second.embedding_text and ICON in second.embedding_text


def test_the_same_image_keeps_its_embedding_when_the_note_is_edited_elsewhere() -> None:
    chunker = MarkdownChunker()
    before = {c.heading_path[-1]: c.content_hash for c in chunk(chunker)}
    other = payload(3_000, 3)
    edited = f"# Before\n\n![x](data:image/png;base64,{other})\n\n" + NOTE.replace(
        "Rain all day.", "Rain all day, then sun."
    )
    chunks = chunk(chunker, edited)
    (trip,) = [c for c in chunks if c.heading_path[-1] == "Trip"]
    assert IMAGE in trip.content_md and IMAGE[:300] not in trip.embedding_text
    after = {c.heading_path[-1]: c.content_hash for c in chunks}
    # The image's section hashes as before (its placeholder depends on the payload only);
    # the edited section does not.
    assert after["Trip"] == before["Trip"] and after["Day 2"] != before["Day 2"]
    assert "Before" in after


def test_an_image_pasted_twice_reads_the_same_in_both_places() -> None:
    text = f"![a](data:image/png;base64,{IMAGE[:4000]})\n\n# Again\n\n"
    text += f"![a](data:image/png;base64,{IMAGE[:4000]})\n"
    first, second = chunk(MarkdownChunker(), text)
    assert first.embedding_text.split("\n\n")[-1] == second.embedding_text.split("\n\n")[-1]


def test_placeholders_avoid_characters_the_note_already_uses() -> None:
    masked = mask_data_uris(f"x ![a](data:image/png;base64,{IMAGE[:1000]})")
    assert masked is not None
    (used,) = masked.payloads  # the character the payload got
    clash = f"{chr(used)} ![a](data:image/png;base64,{IMAGE[:1000]}) {chr(used)}"
    masked = mask_data_uris(clash)
    assert masked is not None and used not in masked.payloads
    chunks = chunk(MarkdownChunker(), clash)
    assert chunks[0].content_md == clash and chunks[0].embedding_text.count(chr(used)) == 2


def test_only_base64_payloads_long_enough_are_masked() -> None:
    assert mask_data_uris("plain note, no images") is None
    assert mask_data_uris(f"![i](data:image/gif;base64,{ICON})") is None
    assert mask_data_uris("data:text/plain;charset=utf-8," + "a" * 5000) is None
    at_limit = "A" * MIN_PAYLOAD_CHARS
    masked = mask_data_uris(f"<img src='DATA:image/svg+xml;name=x.svg;BASE64,{at_limit}'>")
    assert masked is not None and list(masked.payloads.values()) == [at_limit]


def test_split_tables_and_code_keep_their_images() -> None:
    """Table parts (header repeated) and re-fenced code fragments are not slices of the
    note: their payloads come back by their placeholders."""
    img = IMAGE[:2000]
    rows = "".join(f"| {i} | ![r{i}](data:image/png;base64,{img}) |\n" for i in range(40))
    table = f"| id | ![h](data:image/png;base64,{IMAGE[-3000:]}) |\n|---|---|\n{rows}"
    code = "```html\n" + "".join(f'<img src="data:image/png;base64,{img}">\n' for _ in range(30))
    text = f"# T\n\n{table}\n# C\n\n{code}```\n"
    chunker = MarkdownChunker(max_chunk_tokens=40, table_max_tokens=60, max_input_tokens=120)
    chunks = chunk(chunker, text)
    parts = [c for c in chunks if c.metadata.get("header_repeated")]
    fragments = [c for c in chunks if "code_part" in c.metadata]
    assert len(parts) > 3 and len(fragments) > 3
    for c in parts:
        assert c.content_md.startswith(f"| id | ![h](data:image/png;base64,{IMAGE[-3000:]}) |")
    assert all(img in c.content_md and img not in c.embedding_text for c in fragments)


@pytest.mark.parametrize("strategy", [FixedTokenChunker, WholeNoteChunker])
def test_every_strategy_masks_payloads(strategy: type) -> None:
    chunks = chunk(strategy())
    assert len(chunks) == 1 and IMAGE in chunks[0].content_md
    assert IMAGE[:300] not in chunks[0].embedding_text


def test_past_the_free_placeholders_payloads_stay_as_they_are(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(data_uri_module, "_PLANE_15_SIZE", 2)
    images = [payload(400, seed) for seed in range(4)]
    text = "\n\n".join(f"![{i}](data:image/png;base64,{p})" for i, p in enumerate(images))
    masked = mask_data_uris(text)
    assert masked is not None and sorted(masked.payloads.values()) == sorted(images[:2])
    assert images[2] in masked.text and images[3] in masked.text
    (c,) = MarkdownChunker(max_chunk_tokens=8191).chunk_note(text, "t")
    assert c.content_md == text


class WindowsSeen:
    """A stand-in for `_SCHEME` that remembers the length of every text it searched."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.windows: list[int] = []

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        self.windows.append(len(text))
        return self.pattern.finditer(text)


def test_matching_stays_linear_on_adversarial_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each `data:` used to start a regex match that walked every later `;k=v`: 128 KB of
    `data:;a=` took 27 s with the GIL held. Now the work per `;base64,` is bounded: the
    only search around one is its look-back window. (The quadratic walk on the 2 MB texts
    here would outlast the suite's timeout; the timings are `benchmarks/pasted_images.py`'s.)"""
    scheme = WindowsSeen(data_uri_module._SCHEME)
    monkeypatch.setattr(data_uri_module, "_SCHEME", scheme)
    for text, payloads in (
        ("data:;a=" * 16_000 + "\n;base64,\n", 0),  # 128 KB
        ("data:;a=" * 250_000 + ";base64," + "A" * 300, 1),  # 2 MB, one payload at the end
        ((";base64," + "A" * 255) * 8_000, 0),  # 2 MB of payloads one character short
        (("data:;base64," + "A" * 256 + " ") * 7_500, 7_500),  # 2 MB of payloads
    ):
        scheme.windows.clear()
        masked = mask_data_uris(text)
        elided = data_uri_module.elide_data_uris(text)
        assert (masked is None) == (elided == text) == (payloads == 0)
        assert elided.count("…") == payloads and len(payload_spans(text)) == payloads
        # One look-back per `;base64,` for masking, one for eliding, each a bounded window.
        assert len(scheme.windows) <= 2 * text.count(";base64,")
        assert max(scheme.windows, default=0) <= MAX_PREFIX_CHARS + 5, len(text)


def test_many_payloads_beside_many_private_use_characters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Linear probing crawled through a run of plane-15 characters the note already held
    (Nerd Font icons live there): 5 000 payloads beside 60 000 of them took 20 s."""
    _mask_5000_beside("".join(chr(0xF0000 + i) for i in range(60_000)), monkeypatch)


class CountingSet(set[int]):
    """The placeholders in use, counting every membership test (one probe each)."""

    probes = 0

    def __contains__(self, item: object) -> bool:
        self.probes += 1
        return super().__contains__(item)


def _mask_5000_beside(icons: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """5 000 distinct payloads after `icons` mask on characters not in it, with bounded
    work: a few dozen probes a payload at most (`_MAX_PROBES`), plus one walk of the plane
    in order (the lowest free character). A crawl through the icons costs ~30 000 probes a
    payload. (Their timing is `benchmarks/pasted_images.py`'s.)"""
    used: list[CountingSet] = []

    class Counted(data_uri_module._Placeholders):
        def __init__(self, taken: set[int]) -> None:
            super().__init__(CountingSet(taken))
            used.append(self.used)  # type: ignore[arg-type]

    monkeypatch.setattr(data_uri_module, "_Placeholders", Counted)
    text = icons + "\n\n" + " ".join(f"data:;base64,{i:08d}{'A' * 256}" for i in range(5_000))
    masked = mask_data_uris(text)
    assert masked is not None and len(masked.payloads) == 5_000
    assert not set(map(ord, icons)) & set(masked.payloads)
    (placeholders,) = used
    bound = 5_000 * 64 + data_uri_module._PLANE_15_SIZE
    assert placeholders.probes <= bound, placeholders.probes


def test_front_matter_is_decided_on_the_note_as_written() -> None:
    """A front matter block over 64 KB is content; masking its payload made it small
    enough to be read as metadata and left out of every chunk."""
    big = (
        f"---\ntitle: Trip\ncover: data:image/png;base64,{IMAGE[:80_000]}\n---\n\n# Day 1\n\nHi.\n"
    )
    chunks = chunk(MarkdownChunker(), big)  # lossless: the block is content (check_chunks)
    # Content: a thematic break, then a setext heading (the rest), then "Day 1".
    assert chunks[0].start_offset == 0 and chunks[0].content_md == "---"
    assert chunks[-1].heading_path == ["Kyoto", "Day 1"] and chunks[-1].content_md == "Hi."
    small = (
        f"---\ntitle: Trip\ncover: data:image/png;base64,{IMAGE[:4_000]}\n---\n\n# Day 1\n\nHi.\n"
    )
    (only,) = chunk(MarkdownChunker(), small)
    assert only.content_md == "Hi." and IMAGE[:4_000] not in only.embedding_text


def test_a_payload_in_a_heading_reads_as_an_ellipsis_in_the_breadcrumb() -> None:
    for heading in (
        f"# Logo data:image/png;base64,{IMAGE[:400]}",
        f"# Logo `data:image/png;base64,{IMAGE[:400]}`",
        f"Logo data:image/png;base64,{IMAGE[:400]}\n===",
    ):
        text = f"{heading}\n\nThe logo, pasted.\n"
        (c,) = chunk(MarkdownChunker(), text)
        assert c.heading_path == ["Kyoto", "Logo data:image/png;base64,…"], c.heading_path
        assert c.section_path == " > ".join(c.heading_path)


def test_parameters_with_parentheses_are_part_of_the_uri() -> None:
    """`name=Screenshot(1).png` (a link destination may hold balanced parentheses)."""
    text = f"![s](data:image/png;name=Screenshot(1).png;base64,{IMAGE[:40_000]})\n"
    (c,) = chunk(MarkdownChunker(), text)
    assert c.content_md == text.strip() and IMAGE[:300] not in c.embedding_text


def test_colliding_hashes_cost_bounded_probes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Checksums can be made to collide: 800 payloads sharing one probe sequence beside
    plane-15 characters on it took 4 s, growing with the square of the note. Here every
    payload hashes alike; probes stop after a few and the lowest free
    character is taken."""

    class SameDigest:
        @staticmethod
        def blake2b(data: bytes, digest_size: int) -> Any:
            return SimpleNamespace(digest=lambda: bytes(digest_size))

    monkeypatch.setattr(data_uri_module, "hashlib", SameDigest)
    _mask_5000_beside("".join(chr(0xF0000 + i) for i in range(0, 60_000, 7)), monkeypatch)


def test_a_note_opening_with_a_rule_still_masks_its_images() -> None:
    """`---` lines around text that is no front matter either way: masking changes
    nothing there, so the screenshot is masked (the first fix left 718 chunks)."""
    text = f"---\nTrip notes\n\n![map](data:image/png;base64,{IMAGE})\n\n---\n\nMore text.\n"
    chunks = chunk(MarkdownChunker(), text)
    assert len(chunks) <= 3 and all(IMAGE[:300] not in c.embedding_text for c in chunks)


@pytest.mark.parametrize(
    "text",
    [
        f"İdata: ;base64,{IMAGE[:300]}",  # "İ".lower() is two characters
        f"data:x;base64,ſ{IMAGE[:300]}",  # "ſ" folds to "s" outside ASCII
        f"x ;baſe64,{IMAGE[:300]}",
    ],
)
def test_no_payload_by_unicode_case_folding(text: str) -> None:
    assert mask_data_uris(text) is None
    chunk(MarkdownChunker(), text)


def test_a_payload_ending_in_data_and_the_next_uri() -> None:
    """The first payload's last letters are the next URI's `data`: both are payloads."""
    payload = IMAGE[:300] + "data"
    text = f"x data:x;base64,{payload}:y;base64,{IMAGE[:300]}\u212aB end"
    masked = mask_data_uris(text)
    assert masked is not None and sorted(masked.payloads.values()) == sorted([payload, IMAGE[:300]])
    chunk(MarkdownChunker(), text)


def test_placeholders_avoid_the_titles_characters() -> None:
    text = f"# Images\n\n![a](data:image/png;base64,{IMAGE[:1000]})\n"
    masked = mask_data_uris(text)
    assert masked is not None
    (used,) = masked.payloads
    title = f"{chr(used)} Screenshots"  # a Nerd Font icon, say
    (c,) = MarkdownChunker().chunk_note(text, title)
    check_chunks([c], text, title, MarkdownChunker())
    assert c.heading_path == [title, "Images"]


_PIECES = ["data:", "DATA:", ";base64,", ";BaSe64,", "image/png", ";a=b(1)", "A" * 130, "+/_-"]
_PIECES += ["=", "==", ",", " ", "\n", "<", ">", "İ", "ſ", "K", "\U000f0001", "x" * 60]
_URIS = st.tuples(
    st.sampled_from(["data:", "DATA:", "İdata:", "data:image/png;a=b(1)", "data: x", "data:<"]),
    st.sampled_from([";base64,", ";BaSe64,", ";baſe64,", ";base64, "]),
    st.sampled_from(["Qk" * 128, "B" * 255, "A" * 300 + "==", "A" * 300 + "data", "ſ" + "A" * 256]),
).map("".join)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.one_of(_URIS, st.sampled_from(_PIECES)), max_size=16))
def test_the_payload_rule_and_masking_round_trip(parts: list[str]) -> None:
    """The product's payload finder agrees with the checker's independent one, and a
    masked note maps back exactly: every placeholder to its payload, every offset."""
    text = "".join(parts)
    spans = data_uri_module.payload_spans(text)
    assert spans == payload_spans(text)
    masked = mask_data_uris(text)
    if masked is None:
        assert not spans
        return
    assert masked.text.translate(masked.payloads) == text
    for k, position in enumerate(masked.positions):
        start, end = masked.original_offset(position), masked.original_offset(position + 1)
        assert text[start:end] == masked.payloads[ord(masked.text[position])], k
    assert data_uri_module.elide_data_uris(text) == masked.text.translate(
        dict.fromkeys(masked.payloads, "…")
    )
