"""``seqprob explore``: the chain rule in the browser, on a local web page.

The page shows every number the library computes for a typed text: each token's
log P(x_t | x_<t), surprisal, rank and entropy, the joint log P(text) as their sum, the
next-token distribution under temperature, top-k and top-p, several models side by side (the
exact language P* among them, with the KL per position), and, for a GPT, attention and the
logit lens. The page talks to a JSON API (:mod:`.api`) served by Starlette and uvicorn
(:mod:`.server`, the optional extra ``seqprob[explore]``); the models it may use are the
ones named on the command line (:mod:`.models`).
"""
from .api import ApiError, Explorer
from .models import ServedModel, load_served, serve_model

__all__ = ["Explorer", "ApiError", "ServedModel", "load_served", "serve_model"]
