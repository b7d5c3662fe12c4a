"""The second-tier contracts: Trainable and Inspectable, by isinstance."""
import numpy as np
import pytest

import seqprob as sp
from seqprob.analysis import logit_lens
from seqprob.errors import InputError
from seqprob.protocols import Inspectable, LanguageModel, Trainable, is_normalized, model_tokenizer


class Wrapped:
    """Not a GPT subclass: a model that only delegates the public protocol members."""

    def __init__(self, gpt):
        self._gpt = gpt
        self.vocab, self.config, self.params = gpt.vocab, gpt.config, gpt.params

    def logprobs(self, ids):
        return self._gpt.logprobs(ids)

    def token_logprobs(self, ids):
        return self._gpt.token_logprobs(ids)

    def start(self, prefix):
        return self._gpt.start(prefix)

    def step(self, state, token_id):
        return self._gpt.step(state, token_id)

    def loss_and_grads(self, batch):
        return self._gpt.loss_and_grads(batch)

    def run_with_cache(self, ids):
        return self._gpt.run_with_cache(ids)

    def unembed(self, resid):
        return self._gpt.unembed(resid)


TOK = sp.WhitespaceTokenizer.fit(["a b c"])


def _gpt():
    config = sp.GPTConfig(vocab_size=len(TOK.vocab), block_size=8, n_layer=2, n_head=1, n_embd=8)
    return sp.GPT(config, seed=0, tokenizer=TOK)


def test_which_models_have_which_capabilities():
    gpt = _gpt()
    tok = sp.WhitespaceTokenizer.fit(["a b a"])
    kn = sp.ngram.AddK(order=2, k=1).fit(["a b a"], tokenizer=tok)
    assert isinstance(gpt, (LanguageModel, Trainable, Inspectable))
    assert isinstance(gpt, Trainable) and isinstance(gpt, Inspectable)
    assert isinstance(kn, LanguageModel) and not isinstance(kn, Trainable)
    assert not isinstance(kn, Inspectable) and not isinstance(sp.toy_english(), Inspectable)
    assert model_tokenizer(kn) is kn.tokenizer and model_tokenizer(gpt) is TOK and model_tokenizer(object()) is None
    assert is_normalized(kn) and not is_normalized(sp.ngram.StupidBackoff(order=2).fit(["a b"], tokenizer=tok))


def test_train_and_the_logit_lens_accept_any_model_with_the_protocol():
    wrapped, reference = Wrapped(_gpt()), _gpt()
    ids = np.arange(120) % len(TOK.vocab)
    hist = sp.train(wrapped, ids, steps=5, batch_size=2, lr=1e-2, progress=False)
    ref = sp.train(reference, ids, steps=5, batch_size=2, lr=1e-2, progress=False)
    np.testing.assert_allclose(hist.train_loss, ref.train_loss, rtol=1e-6)
    lens = logit_lens(wrapped, "a b c", tokenizer=TOK)
    np.testing.assert_allclose(lens.logprob, logit_lens(reference, "a b c").logprob, rtol=1e-5)


def test_models_without_the_capability_get_a_named_error():
    tok = sp.WhitespaceTokenizer.fit(["a b a"])
    kn = sp.ngram.AddK(order=2, k=1).fit(["a b a"], tokenizer=tok)
    with pytest.raises(InputError, match="Trainable"):
        sp.train(kn, np.arange(50) % 3, steps=2, progress=False)
    with pytest.raises(InputError, match="unembed"):
        logit_lens(kn, "a b", tokenizer=tok)
