r"""A scikit-learn estimator for the common case: a linear classifier fitted by A&R.

:class:`ARClassifier` adapts the Pyro pieces of this package to scikit-learn's conventions
(``fit`` / ``predict`` / ``predict_proba``, ``get_params`` / ``set_params``, ``clone``,
pipelines, pickling): the model is a :class:`~pyro_ar.models.LinearClassifier` with mean
utilities :math:`\psi_{nk} = w_k \cdot x_n + b_k` and

.. math::  y_n = \arg\max_k (\psi_{nk} + \varepsilon_{nk}),
           \qquad \varepsilon_{nk} \overset{iid}{\sim} \phi,

:math:`\phi` the noise of its likelihood object (Gumbel: softmax). The fit maximises by SVI
(:func:`pyro_ar.infer.train`, lazy Adam) the exact log-likelihood or Augment & Reduce's bound

.. math::  \log p(y_n \mid \psi_n) \ge \mathbb{E}_{q(\varepsilon_n)}\Bigl[\log\phi(\varepsilon_n)
           + \sum_{k' \ne y_n} \log\Phi(\varepsilon_n + \psi_{n y_n} - \psi_{n k'})
           - \log q(\varepsilon_n)\Bigr],

its class sum estimated from the likelihood's negatives, plus the log prior
:math:`w_{kd} \sim N(0, s^2)` (``"map"``) -- or the ELBO of a mean-field Gaussian
:math:`q(W, b)` (``"bayes"``). Label sets (an (n, K) indicator or lists of labels) are
fitted by the pick-all-labels objective :math:`\sum_n \sum_{l \in Y_n} \log p(l \mid x_n)`
on the (row, label) pairs of :mod:`pyro_ar.label_sets` -- with the exact softmax, each pair's
normaliser over its choice set, the row's other labels left out
(:class:`~pyro_ar.label_sets.ChoiceSets`).

``predict_proba`` returns the exact marginal
:math:`p(y = k \mid x) = \int \phi(e) \prod_{k' \ne k} \Phi(e + \psi_k - \psi_{k'})\, de`
(:mod:`pyro_ar.evaluation`; the softmax for Gumbel noise), averaged over posterior draws for
``"bayes"``. The training path (sparse inputs, rank, weight pattern, negatives) is chosen from
the data by :func:`pyro_ar.training_path.choose_path`, the features scaled by
:mod:`pyro_ar.features`, the prior scale and the likelihood chosen by
:mod:`pyro_ar.infer.selection`. Sparse ``X`` with at most ``DENSIFY_MAX_ELEMENTS``
entries that is not on the sparse path is densified for training; a larger one is densified
minibatch by minibatch.

Example::

    >>> from sklearn.datasets import load_iris
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from pyro_ar import ARClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = make_pipeline(StandardScaler(), ARClassifier(max_epochs=200, random_state=0))
    >>> clf.fit(X, y).score(X, y) > 0.9
    True
    >>> clf.predict_proba(X[:2]).shape
    (2, 3)

Each ``fit`` runs inside its own Pyro parameter store (``pyro.get_param_store().scope()``), so
estimators never share or clobber parameters; the global RNG states of torch, numpy and
``random`` are restored after ``fit`` (``random_state`` seeds them inside). Not thread-safe:
the param store is process-global.
"""

from ..infer.saved_estimator import params_from_plain
from ..infer.selection import Weights
from .classifier import DENSIFY_MAX_ELEMENTS, ARClassifier

__all__ = ["ARClassifier", "DENSIFY_MAX_ELEMENTS", "Weights", "params_from_plain"]
