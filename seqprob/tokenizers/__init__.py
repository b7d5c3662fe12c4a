"""Tokenizers: text <-> ids. Word, character, byte-level BPE and tiktoken encodings.

``tiktoken`` itself is imported only when a BPE or tiktoken encoding is built, and the
``tokenizers`` library (Hugging Face) only when an :class:`HFTokenizer` is loaded.
"""
from .base import Tokenizer, load_tokenizer
from .bpe import BPETokenizer
from .hf import HFTokenizer
from .simple import CharTokenizer, WhitespaceTokenizer
from .tiktoken_io import TiktokenTokenizer

__all__ = ["Tokenizer", "load_tokenizer", "WhitespaceTokenizer", "CharTokenizer", "BPETokenizer",
           "TiktokenTokenizer", "HFTokenizer"]
