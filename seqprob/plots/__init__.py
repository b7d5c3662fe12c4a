"""Figures for every comparison seqprob makes (matplotlib, imported only when a plot is drawn).

Every function takes its data first and returns the matplotlib ``Axes`` it drew on (``ax=``
draws into an existing one) or, for grids, a ``Figure``; keyword ``**style`` options override
the title and labels. Colours are the Okabe-Ito palette (colour-blind safe). Log-probabilities
of -inf (P = 0) or NaN are never dropped silently: they are gaps marked "impossible".

Outside an interactive session the figures are not registered with pyplot (nothing leaks):
save them with ``ax.figure.savefig("out.png")``.

A figure a function makes itself is laid out for reading (constrained layout, then
``fit_texts``): titles and labels wrapped to their Axes, token labels thinned where they would
overlap, texts inside an Axes never drawn over each other, legends with many entries beside the
data. When you pass ``ax=`` and add more to the figure, call ``seqprob.plots.fit_texts(fig)``
once it is complete.

=========================  ==================================================  ==========
function                   data                                                returns
=========================  ==================================================  ==========
surprisal                  ``seqprob.score`` DataFrame, one sentence           Axes
cumulative_logprob         ``seqprob.score`` DataFrame (the chain rule)        Axes
sentence_comparison        ``seqprob.score`` DataFrame, several sentences      Figure
next_token                 a (V,) row of log-probs, several temperatures       Axes
lookup_table               vocabulary sizes (V^T vs atoms in the universe)     Axes
learning_curves            ``seqprob.train`` history (+ baselines, entropy)    Axes
sparsity                   ``analysis.sparsity_curve`` DataFrame               Axes
attention                  a GPT + text, an ActivationCache or an array        Figure
logit_lens                 ``analysis.logit_lens`` DataFrame                   Axes
embeddings                 ``analysis.embedding_pca`` DataFrame                Axes
embedding_directions       ``analysis.embedding_directions`` DataFrame         Axes
analogy                    ``analysis.analogy`` DataFrame                      Axes
reliability                ``analysis.calibration`` DataFrame                  Axes
nll_by_position            ``seqprob.score`` DataFrame (long texts, stride)    Axes
perplexity_by_stride       ``windows.stride_sweep`` DataFrame                  Axes
=========================  ==================================================  ==========
"""
from ._style import IMPOSSIBLE, OKABE_ITO, fit_texts
from .calibration import reliability
from .internals import analogy, attention, embedding_directions, embeddings, logit_lens
from .scores import cumulative_logprob, lookup_table, next_token, sentence_comparison, surprisal
from .training import learning_curves, sparsity
from .windows import nll_by_position, perplexity_by_stride

__all__ = ["surprisal", "cumulative_logprob", "sentence_comparison", "next_token", "lookup_table",
           "learning_curves", "sparsity", "attention", "logit_lens", "embeddings",
           "embedding_directions", "analogy", "reliability", "nll_by_position",
           "perplexity_by_stride", "fit_texts", "OKABE_ITO", "IMPOSSIBLE"]
