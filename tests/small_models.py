"""Small shared test data: a six-sentence corpus, its word tokenizer and a random float64 GPT
(module-scoped pytest fixtures; import them into a test module to use them)."""
import pytest

from seqprob.gpt import GPT, GPTConfig
from seqprob.tokenizers import WhitespaceTokenizer

LINES = ["the cat sat on the mat", "the dog sat on the mat", "the king saw the queen",
         "the man saw the woman", "the cats sat", "the dogs sat"]


@pytest.fixture(scope="module")
def tok():
    return WhitespaceTokenizer.fit(LINES)


@pytest.fixture(scope="module")
def gpt(tok):
    cfg = GPTConfig(vocab_size=len(tok.vocab), block_size=16, n_layer=2, n_head=2, n_embd=16, dtype="float64")
    return GPT(cfg, seed=0, tokenizer=tok)
