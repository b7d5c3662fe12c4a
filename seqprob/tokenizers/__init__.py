"""Tokenizers: text <-> ids. Word, character, byte-level BPE and tiktoken encodings."""
from .base import Tokenizer, load_tokenizer
from .simple import CharTokenizer, WhitespaceTokenizer

__all__ = ["Tokenizer", "load_tokenizer", "WhitespaceTokenizer", "CharTokenizer"]
