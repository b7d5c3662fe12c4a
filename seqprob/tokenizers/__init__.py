"""Tokenizers: text <-> ids. Word, character, byte-level BPE and tiktoken encodings.

``tiktoken`` itself is imported only when a BPE or tiktoken encoding is built.
"""
from .base import Tokenizer, load_tokenizer
from .bpe import BPETokenizer
from .simple import CharTokenizer, WhitespaceTokenizer
from .tiktoken_io import TiktokenTokenizer

__all__ = ["Tokenizer", "load_tokenizer", "WhitespaceTokenizer", "CharTokenizer", "BPETokenizer",
           "TiktokenTokenizer"]
