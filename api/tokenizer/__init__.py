"""Exact token counts for the embedding model in use: tiktoken `cl100k_base` (OpenAI,
vocabulary loaded offline from package data) or the local model's word pieces. A leaf:
the chunker and the connectors both count with it; it imports nothing from the app."""

from api.tokenizer.encoders import (
    HuggingFaceTokenizer,
    TiktokenTokenizer,
    Tokenizer,
    default_tokenizer,
    tiktoken_tokenizer,
)

__all__ = [
    "HuggingFaceTokenizer",
    "TiktokenTokenizer",
    "Tokenizer",
    "default_tokenizer",
    "tiktoken_tokenizer",
]
