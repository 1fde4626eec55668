"""Exact token arithmetic: split_at_tokens, the one-pass token index, boundary property."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.chunking.text import SourceText
from api.chunking.token_index import TokenIndex, universal_boundaries
from api.tokenizer import HuggingFaceTokenizer, Tokenizer, tiktoken_tokenizer
from tests.chunking.chunk_invariants import minilm_tokenizer
from tests.chunking.test_chunker_corpus import CORPUS

# Fragments chosen to hit every branch of the pre-tokeniser regexes: contractions,
# case changes, digit runs, punctuation + newlines, slashes, Unicode letters/marks/spaces.
PARTS = st.sampled_from([
    "a", "Zed", " ", "  ", "\n", "\n\n", "\r\n", "\t", ".", "...", "/", "//", "#", "-", "*",
    "'", "'s", "don't", "I'LL", "camelCase", "ABCdef", "1", "23", "4567", "3.14", "é", "e\u0301",
    "你好", "😀", "👩\u200d💻", "\u3000", "\u00a0", "\x00", "$", "<br>", "x\n y", "\n/", "ab12cd",
])  # fmt: skip
TEXTS = st.lists(PARTS, min_size=0, max_size=60).map("".join)
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class ProxyTokenizer:
    """Forwards to tiktoken but is not a TiktokenTokenizer: exercises the generic path."""

    def __init__(self) -> None:
        self._inner = tiktoken_tokenizer("cl100k_base")
        self.name = "proxy:cl100k_base"

    def count(self, text: str) -> int:
        return self._inner.count(text)

    def count_batch(self, texts: list[str]) -> list[int]:
        return self._inner.count_batch(texts)

    def encode(self, text: str) -> list[int]:
        return self._inner.encode(text)

    def split_at_tokens(self, text: str, max_tokens: int) -> list[str]:
        return self._inner.split_at_tokens(text, max_tokens)


def tokenizers() -> list[Tokenizer]:
    return [
        tiktoken_tokenizer("cl100k_base"),
        tiktoken_tokenizer("o200k_base"),
        minilm_tokenizer(),
        ProxyTokenizer(),
    ]


def test_tokenizers_satisfy_the_protocol() -> None:
    for tok in tokenizers():
        assert isinstance(tok, Tokenizer)
    assert isinstance(minilm_tokenizer(), HuggingFaceTokenizer)


@SETTINGS
@given(text=TEXTS, max_tokens=st.integers(1, 12), which=st.integers(0, 2))
def test_split_at_tokens_pieces_fit_on_their_own(text: str, max_tokens: int, which: int) -> None:
    tok = tokenizers()[which]
    pieces = tok.split_at_tokens(text, max_tokens)
    assert "".join(pieces) == text
    assert all(pieces)
    for piece, n in zip(pieces, tok.count_batch(pieces), strict=True):
        assert n <= max_tokens or len(piece) == 1  # one character can cost 2+ tokens


def test_split_at_tokens_regression_reencoded_windows() -> None:
    # Token windows cut inside words re-tokenise to more tokens than the window had: the
    # old implementation returned such pieces; every piece must now fit on its own.
    tok = tiktoken_tokenizer("cl100k_base")
    text = "internationalization " * 40 + "🙂你好" * 30
    for limit in (1, 2, 3, 5, 8):
        pieces = tok.split_at_tokens(text, limit)
        assert "".join(pieces) == text
        assert max(tok.count_batch(pieces)) <= max(limit, 2)


@SETTINGS
@given(text=TEXTS, data=st.data())
def test_index_exact_counts_match_direct_counts(text: str, data: st.DataObject) -> None:
    src = SourceText(text)
    starts = [i for i in range(len(src.data) + 1) if i == len(src.data) or
              (src.data[i] & 0xC0) != 0x80]  # fmt: skip
    spans = []
    for _ in range(8):
        a, b = sorted(data.draw(st.sampled_from(starts)) for _ in range(2))
        spans.append((a, b))
    for tok in tokenizers():
        index = TokenIndex(tok, src)
        assert index.exact(spans) == [tok.count(src.decode(a, b)) for a, b in spans], tok.name


@SETTINGS
@given(text=TEXTS)
def test_universal_boundaries_split_counts_additively(text: str) -> None:
    src = SourceText(text)
    if len(src.data) < 2:
        return
    for name in ("cl100k_base", "o200k_base"):
        tok = tiktoken_tokenizer(name)
        total = tok.count(text)
        for p in universal_boundaries(src.arr).tolist():
            assert tok.count(src.decode(0, p)) + tok.count(src.decode(p, len(src))) == total


def test_universal_boundaries_table_is_the_rule_for_every_byte_pair() -> None:
    # The module docstring's rule, spelled out byte by byte, against the class tables.
    def rule(prev: int, cur: int) -> bool:
        def is_letter(b: int) -> bool:
            return chr(b).isascii() and chr(b).isalpha()

        def is_digit(b: int) -> bool:
            return 0x30 <= b <= 0x39

        line_start = prev == 10 and 0x21 <= cur <= 0x7E and cur != ord("/")
        after_word = is_letter(prev) and cur < 0x80 and not is_letter(cur) and cur != ord("'")
        after_number = is_digit(prev) and cur < 0x80 and not is_digit(cur)
        return line_start or after_word or after_number

    pairs = np.array([(p, c) for p in range(256) for c in range(256)], dtype=np.uint8)
    arr = np.empty(len(pairs) * 3, dtype=np.uint8)  # p, c, then a separator byte
    arr[0::3], arr[1::3], arr[2::3] = pairs[:, 0], pairs[:, 1], 0
    found = set(universal_boundaries(arr).tolist())
    for k, (p, c) in enumerate(pairs.tolist()):
        assert (3 * k + 1 in found) == rule(p, c), (p, c)


@SETTINGS
@given(
    data=st.binary(min_size=2, max_size=400).map(lambda b: np.frombuffer(b, dtype=np.uint8)),
    block=st.integers(1, 64),
)
def test_universal_boundaries_found_block_by_block_equal_one_pass(
    data: np.ndarray, block: int
) -> None:
    # Block seams must neither lose nor repeat a boundary (the pair straddling a seam).
    one_pass = universal_boundaries(data, block=len(data))
    assert universal_boundaries(data, block=block).tolist() == one_pass.tolist()


def test_index_estimates_are_monotonic_and_total() -> None:
    text = "# Title\n\nSome text, with 12345 numbers and émojis 😀.\n" * 50
    src = SourceText(text)
    for tok in tokenizers():
        index = TokenIndex(tok, src)
        at = index.at(np.arange(len(src) + 1))
        assert (np.diff(at) >= 0).all()
        assert at[-1] == index.total
        assert abs(index.total - tok.count(text)) <= 2


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_byte_lengths_table_matches_vocabulary(name: str) -> None:
    tok = tiktoken_tokenizer(name)
    ids = tok.encode("Hello wörld 😀 你好 \x00 ...")
    assert [int(tok.byte_lengths[i]) for i in ids] == [
        len(tok.encoding.decode_single_token_bytes(i)) for i in ids
    ]


def test_count_batch_agrees_with_count_for_large_batches() -> None:
    tok = tiktoken_tokenizer("cl100k_base")
    # Above 64 texts and 1 MiB in total the threaded batch path is taken.
    texts = [f"text number {i}, with words. " * (i % 7 + 200) for i in range(200)]
    assert sum(map(len, texts)) > 1 << 20
    assert tok.count_batch(texts) == [tok.count(t) for t in texts]


LONG_RUN = " " * 1_100_000  # tiktoken alone: ValueError (encode_to_numpy) or a Rust panic


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_whitespace_runs_tiktoken_cannot_encode_are_counted_in_segments(name: str) -> None:
    """A run of ~1 000 000 spaces or tabs made tiktoken fail (its regex's backtracking
    limit), so a note holding one was never indexed; it is now encoded in segments."""
    tok = tiktoken_tokenizer(name)
    text = "intro" + LONG_RUN + "x\n\t" + "\t" * 300_000 + "end"
    n = tok.count(text)
    assert n == len(tok.encode(text)) == len(tok.encode_array(text)) > 0
    assert tok.count_batch([text, "a b"]) == [n, 2]
    # Each segment on its own costs what its slice of the run costs: a whitespace token
    # more or less per cut, nothing like a character per token.
    assert tok.count(LONG_RUN) < len(LONG_RUN) // 100
    # Text without such a run is untouched.
    spec = (CORPUS / "commonmark_spec.md").read_text("utf-8") * 2
    assert tok.count(spec) == len(tok.encoding.encode_ordinary(spec))


def test_an_index_over_a_segmented_run_still_counts_spans_exactly() -> None:
    tok = tiktoken_tokenizer("cl100k_base")
    text = "alpha beta\n" * 50 + LONG_RUN + "gamma delta\n" * 50
    src = SourceText(text)
    index = TokenIndex(tok, src)
    n = len(src.data)
    spans = [(0, n), (0, 300), (200, n - 200), (500_000, 600_000), (n - 300, n)]
    assert index.exact(spans) == [tok.count(src.decode(a, b)) for a, b in spans]


WORD_PIECE_PARTS = st.sampled_from([
    "a", "Zed", "don't", "ÉCOLE", "e\u0301", " ", "  ", "\n", "\r\n", "\t", "\u00a0", "\u3000",
    "\x00", "\x1c", "\u200b", "\ufeff", ".", "!!", "?!", "-", "[x]", "`", "```", "中文", "日本語",
    "😀", "a" * 120, "naïve", "١٢٣", "\u0301",
])  # fmt: skip


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(WORD_PIECE_PARTS, max_size=50), size=st.integers(1, 12))
def test_word_piece_segments_give_the_tokens_of_the_whole_text(parts: list[str], size: int) -> None:
    """Long texts are encoded in segments (bounded memory): the cuts must never change a
    token, whatever sits around them (normaliser-removed characters, CJK, accents...)."""
    from api.tokenizer.encoders import segments_at, word_piece_cuts

    backend = minilm_tokenizer().backend
    text = "".join(parts)
    segments = segments_at(text, word_piece_cuts(backend), size)
    assert "".join(segments) == text
    pieces = [i for seg in segments for i in backend.encode(seg, add_special_tokens=False).ids]
    assert pieces == backend.encode(text, add_special_tokens=False).ids


class _RecordingBackend:
    """A tokenizers.Tokenizer stand-in that forwards and records the largest input."""

    def __init__(self, inner: object) -> None:
        self._inner = inner
        self.largest = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    def encode(self, text: str, **kwargs: object) -> object:
        self.largest = max(self.largest, len(text))
        return self._inner.encode(text, **kwargs)  # type: ignore[attr-defined]

    def encode_batch(self, texts: list[str], **kwargs: object) -> object:
        self.largest = max(self.largest, sum(map(len, texts)))
        return self._inner.encode_batch(texts, **kwargs)  # type: ignore[attr-defined]


def test_a_long_note_is_word_piece_encoded_in_bounded_pieces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 2 MB note of backticks was one Encoding of 2 000 000 tokens: 1.1 GB and 2.5 s
    (11 s and 2.3 GB to chunk). Every call now sees a bounded share of the text, and the
    positions and counts are those of the whole text."""
    from api.tokenizer import encoders as tk

    # Small segments and groups (as the 32 K / 256 K defaults are to a 2 MB note).
    monkeypatch.setattr(tk, "_HF_SEGMENT_CHARS", 1_000, raising=False)
    monkeypatch.setattr(tk, "_HF_GROUP_CHARS", 4_000, raising=False)
    plain = minilm_tokenizer()
    text = "`" * 150_000 + " word " * 20_000 + "中文" * 40_000
    recording = _RecordingBackend(plain.backend)
    tok = tk.HuggingFaceTokenizer(recording, "all-MiniLM-L6-v2")  # type: ignore[arg-type]
    whole = plain.backend.encode(text, add_special_tokens=False)
    expected_ends = np.maximum.accumulate(np.array([e for _, e in whole.offsets]))
    ids, ends = tok.ids_and_char_ends(text)
    assert np.array_equal(ends, expected_ends) and ids.tolist() == whole.ids
    assert tok.count(text) == len(whole.ids)
    assert tok.count_batch([text, "a b", text[:10]]) == [len(whole.ids), 2, 10]
    assert tok.encode(text) == whole.ids
    assert recording.largest <= 5_000


def test_every_ideograph_a_segment_may_start_with_keeps_the_tokens() -> None:
    """The cut before a CJK ideograph is safe only where BertNormalizer pads it with
    spaces: the first ranges took whole supplementary planes, and a cut before U+2CEB0
    split 'ab𬺰cd' into two words. Every code point the rule cuts
    before, between two words."""
    from api.tokenizer.encoders import segments_at, word_piece_cuts

    backend = minilm_tokenizer().backend
    cuts = word_piece_cuts(backend)
    assert cuts is not None
    points = [cp for cp in range(0x3000, 0x30000) if cuts.fullmatch(chr(cp))]
    assert len(points) > 80_000
    for i in range(0, len(points), 4000):
        text = "".join(f"ab{chr(cp)}cd " for cp in points[i : i + 4000])
        pieces = segments_at(text, cuts, 1)
        ids = [t for p in pieces for t in backend.encode(p, add_special_tokens=False).ids]
        assert ids == backend.encode(text, add_special_tokens=False).ids, hex(points[i])
