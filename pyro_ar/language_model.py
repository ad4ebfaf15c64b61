"""Deprecated: the bigram model moved to :mod:`pyro_ar.models.bigram` (import it from
:mod:`pyro_ar.models`). This alias will be removed in the next release."""

import warnings

from .models.bigram import BigramLanguageModel, unigram_log_probs

__all__ = ["BigramLanguageModel", "unigram_log_probs"]

warnings.warn("pyro_ar.language_model is deprecated; import BigramLanguageModel and "
              "unigram_log_probs from pyro_ar.models", DeprecationWarning, stacklevel=2)
