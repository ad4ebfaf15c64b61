r"""A scikit-learn estimator for the common case: a linear classifier fitted by A&R.

:class:`ARClassifier` wraps the Pyro pieces of this package -- :class:`~pyro_ar.models.LinearClassifier`,
the local guides and :class:`~pyro_ar.infer.ClosedFormELBO` of :mod:`pyro_ar.infer`,
:func:`~pyro_ar.optim.lazy_adam` and stock ``pyro.infer.SVI`` -- behind ``fit`` /
``predict`` / ``predict_proba``, following scikit-learn's conventions (``get_params`` /
``set_params``, ``classes_``, ``n_features_in_``, ``clone``, pipelines, pickling).

The model
---------
For features :math:`x_n \in \mathbb{R}^D` and labels :math:`y_n \in \{0..K-1\}` (the
positions of the labels in ``classes_``), the mean utilities are
:math:`\psi_{nk} = w_k \cdot x_n + b_k` and

.. math::  y_n = \arg\max_k (\psi_{nk} + \varepsilon_{nk}),
           \qquad \varepsilon_{nk} \overset{iid}{\sim} \phi,

with :math:`\phi` Gumbel (softmax), Normal (multinomial probit) or Logistic
(``noise=``). Augment & Reduce keeps only the observed class's noise
:math:`\varepsilon_n`:

.. math::  \log p(y_n, \varepsilon_n \mid \psi_n) = \log\phi(\varepsilon_n)
           + \sum_{k' \ne y_n} \log\Phi(\varepsilon_n + \psi_{n y_n} - \psi_{n k'}),

estimates the sum over classes from ``num_negatives`` classes (``strategy=``), and
maximises the evidence lower bound

.. math::  \log p(y_n \mid \psi_n) \ge \mathbb{E}_{q(\varepsilon_n)}
           [\log p(y_n, \varepsilon_n \mid \psi_n) - \log q(\varepsilon_n)]

summed over minibatches of ``batch_size`` datapoints with ``SVI``. For softmax,
:math:`q(\varepsilon_n) = \mathrm{Gumbel}(\log\eta_n, 1)` and the bound is closed-form,
:math:`1 - \log\eta_n - (1 + \hat S_n)/\eta_n` with
:math:`\hat S_n \approx \sum_{k' \ne y_n} e^{\psi_{nk'} - \psi_{ny_n}}`; :math:`\eta_n`
takes natural-gradient steps (:class:`~pyro_ar.infer.GumbelLocalGuide`). For the other
noises :math:`q(\varepsilon_n\mid\psi_n)` is refitted at every step from the current
utilities -- the best Gaussian for the local bound, drawn reparameterised
(:class:`~pyro_ar.infer.local_guides.ConditionalLocalGuide`; no per-datapoint state).

The weights are point estimates (``weights="mle"``), point estimates with the Gaussian
prior :math:`w_{kd} \sim N(0, s^2)`, ``s = prior_scale``, on W only (``"map"``: the
biases unpenalised, like scikit-learn's intercept), or random with the prior
:math:`w_{kd}, b_k \sim N(0, s^2)` and a mean-field Gaussian posterior :math:`q(W, b)` (``"bayes"``:
``AutoNormal`` over ``W, b`` combined with the local guide in an ``AutoGuideList``).

Multi-label targets
-------------------
``fit(X, Y)`` also takes label sets: an (n, K) 0/1 indicator (dense or ``scipy.sparse``,
e.g. from ``MultiLabelBinarizer``; ``classes_ = arange(K)``) or a list of label lists /
sets (``classes_`` their sorted union). The objective is then the *pick-all-labels* one
(:mod:`pyro_ar.label_sets`): every positive label of a row is an observation of the row's
categorical over all K classes,

.. math::  \sum_n \sum_{l \in Y_n} \log p(l \mid x_n),

fitted by A&R on the (row, label) pairs exactly as one-label data. A row's other positives
stay in the softmax normaliser, so the sampled negatives treat them like any other class
and the bound is unbiased for this objective; its population optimum is
:math:`p(l \mid x) = P(l \in Y \mid x) / \mathbb{E}[|Y| \mid x]`, a ranking of the labels
by their marginal relevance (what precision at k rewards). Rows without a label give no
pair; the held-out split of early stopping and of the prior-scale search keeps all pairs
of a row on one side. ``predict`` returns label sets in the form ``Y`` had (the
``labels_per_row_`` = mean training set size, rounded, most probable labels of each row),
``predict_top_k(X, k)`` any number of ranked labels, ``predict_proba`` one distribution per
row (:math:`p(l \mid x)` above), ``score`` precision at 1 and ``log_likelihood`` the mean over
the pairs. :mod:`pyro_ar.evaluation` has P@k, nDCG@k and PSP@k.

Prediction
----------
``predict_proba`` returns the exact marginal

.. math::  p(y = k \mid x) = \int \phi(e) \prod_{k' \ne k} \Phi(e + \psi_k - \psi_{k'})\, de

(the softmax of :math:`\psi` for Gumbel noise; Gauss-Hermite quadrature otherwise, which
costs O(K^2) per row), and for ``weights="bayes"`` the posterior predictive average
:math:`\frac1S \sum_s p(y = k \mid x, W_s, b_s)` over ``num_posterior_samples`` draws
from :math:`q(W, b)` (drawn with a seed fixed at fit time, so repeated calls agree).
``predict`` is the class of largest mean utility for point weights (the most probable
class, for every iid noise) and the argmax of the predictive average for ``"bayes"``.

Costs and inputs
----------------
A step costs O(``batch_size`` x ``num_negatives`` x D) for dense inputs and ``"mle"``/``"map"`` (sparse
gradients, lazy Adam: only the rows used move), whatever K and N; ``"bayes"`` costs
O(K D) per step (the Gaussian posterior over all of W), for moderate K: the estimator uses
the per-class weight strategy of ``LinearClassifier(weights="bayes")`` (it takes a rank, sparse
inputs and every negatives strategy, and its saved files hold ``AutoNormal`` parameters), not the
class-subsampled one of :class:`~pyro_ar.models.BayesianLinearClassifier` (the same model,
O(subsample) per step; ``docs/choosing.rst``, "Bayesian weights: which route"). The local
variational parameters are O(N) training state; they are discarded after ``fit``
(``param_state_`` keeps the global parameters only).

``X`` may be a dense array or a ``scipy.sparse`` matrix/array. Sparse ``X`` of the sparse
path (at most 10% non-zeros and at least 128 features; the rule is
``pyro_ar.training_path.choose_path``) is never densified: the utilities of a
minibatch come from its non-zeros, O(nnz x (1 + s)) per step, with gradients (and lazy
Adam updates) only at the (class, feature) entries used; when a full K x D W and its
optimizer state would not fit comfortably in memory the model is low rank,
:math:`W = V E^\top` (``rank=``), and where per-datapoint negatives would gather too much
per step they are shared (``strategy="auto"``). Other sparse ``X`` with at most
:data:`DENSIFY_MAX_ELEMENTS` entries (``n_samples * n_features``, 2^24 by default, i.e.
64 MB in float32) is converted to one dense tensor for training; a larger one stays
sparse (CSR) and only the rows of each minibatch are densified, so the whole matrix is
never densified at once (keep ``batch_size`` moderate). Prediction always densifies row
chunks. Training runs in float32 on ``device``; predictions are computed in float64.
Features are used as given: standardise them (e.g. ``StandardScaler`` in a
``Pipeline``) for well-conditioned steps.

Example::

    >>> from sklearn.datasets import load_iris
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from pyro_ar import ARClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = make_pipeline(StandardScaler(),
    ...                     ARClassifier(num_negatives=1, max_epochs=200, random_state=0))
    >>> clf.fit(X, y).score(X, y) > 0.9
    True
    >>> clf.predict_proba(X[:2]).shape
    (2, 3)

Implementation notes: each ``fit`` runs inside its own Pyro parameter store
(``pyro.get_param_store().scope()``), so estimators never share or clobber parameters
(and the caller's global store is left as it was); the same holds for prediction with
``weights="bayes"``. The global RNG states of torch, numpy and ``random`` are restored
after ``fit`` (``random_state`` seeds them inside). Not thread-safe: the param store is
process-global.
"""

from ..infer.selection import Weights
from .classifier import DENSIFY_MAX_ELEMENTS, ARClassifier

__all__ = ["ARClassifier", "DENSIFY_MAX_ELEMENTS", "Weights"]
