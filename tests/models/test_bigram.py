"""Tests of pyro_ar.models.BigramLanguageModel."""

import math

import pytest
import torch

import pyro
from pyro.infer import SVI, Trace_ELBO

from pyro_ar.infer import default_elbo, default_guide
from pyro_ar.models import BigramLanguageModel, unigram_log_probs
from pyro_ar.optim import lazy_adam
from pyro_ar.likelihoods import AR, get_likelihood
from pyro_ar.models import Init, MAP
from pyro_ar.negatives import ImportanceNegatives, SharedNegatives

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA")


pytestmark = pytest.mark.usefixtures("seeded")


def _bigram_data(K=40, N=4000, seed=0, device="cpu"):
    """Bigrams from a random sparse-ish transition matrix."""
    g = torch.Generator().manual_seed(seed)
    logits = 3.0 * torch.randn(K, K, generator=g)
    prev = torch.randint(0, K, (N,), generator=g)
    nxt = torch.multinomial(logits.softmax(-1)[prev], 1, generator=g).squeeze(-1)
    return prev.to(device), nxt.to(device), logits


def _full_log_softmax_ll(model, prev, nxt):
    E, Wb = (pyro.param(n).detach() for n in ("context", "output"))
    psi = E[prev] @ Wb[:, :-1].T + Wb[:, -1]
    return psi.log_softmax(-1).gather(-1, nxt[:, None]).mean().item()


def test_log_likelihood_matches_brute_force():
    prev, nxt, _ = _bigram_data()
    model = BigramLanguageModel(40, 6, likelihood=AR(negatives=SharedNegatives(8)))
    model(prev, nxt)
    assert model.log_likelihood(prev, nxt, chunk_size=7) == pytest.approx(
        _full_log_softmax_ll(model, prev, nxt), abs=1e-5)
    per = model.log_likelihood(prev[:9], nxt[:9], reduce="none")
    assert per.shape == (9,) and (per <= 0).all()


def test_create_plates_is_o_b_and_distinct():
    prev, nxt, _ = _bigram_data(N=1000)
    model = BigramLanguageModel(40, 4, likelihood=AR(negatives=SharedNegatives(8)), subsample_size=64)
    with model.create_plates(prev, nxt) as idx:
        assert idx.shape == (64,) and idx.unique().numel() == 64 and int(idx.max()) < 1000
    with model.create_plates(prev) as idx:  # prediction: every row
        assert idx.shape == (1000,)


def test_ar_step_touches_only_minibatch_rows():
    K, N, B, S = 500, 3000, 32, 16
    g = torch.Generator().manual_seed(0)
    prev, nxt = torch.randint(0, K, (N,), generator=g), torch.randint(0, K, (N,), generator=g)
    q = torch.rand(K, dtype=torch.float64) + 0.1
    model = BigramLanguageModel(K, 8, likelihood=AR(negatives=ImportanceNegatives(S, q)), subsample_size=B)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.05}), default_elbo())
    svi.step(prev, nxt)
    E0, W0 = (pyro.param(n).detach().clone() for n in ("context", "output"))
    svi.step(prev, nxt)
    E1, W1 = (pyro.param(n).detach() for n in ("context", "output"))
    assert 0 < (E1 != E0).any(-1).sum() <= B
    assert 0 < (W1 != W0).any(-1).sum() <= B + S
    for p in (pyro.param("context"), pyro.param("output")):
        assert p.unconstrained().grad is None or p.unconstrained().grad.is_sparse


@pytest.mark.parametrize("likelihood", ["ove", "sampled", "exact"])
def test_baselines_step(likelihood):
    prev, nxt, _ = _bigram_data()
    lik = get_likelihood(likelihood, num_negatives=None if likelihood == "exact" else 8, strategy="shared")
    model = BigramLanguageModel(40, 6, likelihood=lik, subsample_size=64)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.05}), Trace_ELBO())
    assert all(math.isfinite(svi.step(prev, nxt)) for _ in range(3))


def test_map_prior_estimate_is_unbiased():
    model = BigramLanguageModel(60, 3, likelihood=AR(negatives=SharedNegatives(6)),
                                weights=MAP(prior_scale=0.7))
    params = model.parameters()
    E, Wb = params["context"], params["output"]
    prior = torch.distributions.Normal(0.0, 0.7)
    exact = (prior.log_prob(E).sum() + prior.log_prob(Wb).sum()).item()
    draws = torch.tensor([model.log_prior_estimate(params).item() for _ in range(4000)])
    se = draws.std().item() / math.sqrt(len(draws))
    assert abs(draws.mean().item() - exact) < 5 * se
    model_full = BigramLanguageModel(60, 3, likelihood=AR(), weights=MAP(prior_scale=0.7))
    assert model_full.log_prior_estimate(params).item() == pytest.approx(exact, rel=1e-6)


def test_ar_softmax_learns_bigrams():
    """A&R softmax (importance negatives, local-first eta step) improves the exact training
    log-likelihood well beyond the unigram start on a small bigram problem."""
    K = 40
    prev, nxt, logits = _bigram_data(K, N=6000)
    counts = torch.bincount(nxt, minlength=K)
    model = BigramLanguageModel(K, 8,
                                likelihood=AR(negatives=ImportanceNegatives(10, counts.double() ** 0.75 + 1)),
                                init=Init(bias=unigram_log_probs(counts)), subsample_size=200)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.03}), default_elbo())
    svi.step(prev, nxt)
    start = model.log_likelihood(prev, nxt)
    for _ in range(150):
        svi.step(prev, nxt)
    end = model.log_likelihood(prev, nxt)
    best = logits.log_softmax(-1)[prev, nxt].mean().item()  # the generating model (-1.40)
    assert end > start + 1.0 and end < best + 0.05, (start, end, best)  # start -3.48


def test_probit_log_likelihood_is_normalised():
    model = BigramLanguageModel(5, 3, likelihood=AR("normal", negatives=SharedNegatives(2)))
    prev = torch.tensor([1, 1, 1, 1, 1])
    model(prev, torch.zeros(5, dtype=torch.long))
    lp = model.log_likelihood(prev, torch.arange(5), reduce="none")
    assert lp.exp().sum().item() == pytest.approx(1.0, abs=1e-5)


def test_errors():
    with pytest.raises(ValueError, match="proposal"):
        BigramLanguageModel(10, 2, likelihood=AR(negatives=ImportanceNegatives(3, None)))
    with pytest.raises(ValueError, match="weights"):
        BigramLanguageModel(10, 2, weights="posterior", likelihood=AR(negatives=SharedNegatives(3)))
    model = BigramLanguageModel(10, 2, likelihood=AR(negatives=SharedNegatives(3)))
    with pytest.raises(ValueError, match="integer"):
        model(torch.zeros(4), torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="shape"):
        model(torch.zeros(4, dtype=torch.long), torch.zeros(3, dtype=torch.long))


@CUDA
def test_cuda_step_and_log_likelihood():
    prev, nxt, _ = _bigram_data(device="cuda")
    counts = torch.bincount(nxt, minlength=40).cuda()
    model = BigramLanguageModel(40, 6, likelihood=AR(negatives=ImportanceNegatives(8, counts.double() + 1)),
                                subsample_size=64)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.05}), default_elbo())
    assert math.isfinite(svi.step(prev, nxt))
    assert pyro.param("output").device.type == "cuda"
    assert math.isfinite(model.log_likelihood(prev, nxt))


def test_log_likelihood_of_empty_input_is_a_named_error():
    """Issue 12: was NaN (then 'rows is empty', naming an internal argument)."""
    model = BigramLanguageModel(10, 4, likelihood=AR())
    empty = torch.zeros(0, dtype=torch.long)
    with pytest.raises(ValueError, match=r"prev has 0 rows: a model needs at least one datapoint"):
        model.log_likelihood(empty, empty)
    with pytest.raises(ValueError, match=r"next must have shape \(3,\)"):
        model.log_likelihood(torch.zeros(3, dtype=torch.long), empty)


# ---------------------------------------------------------------------------
# the exact path (issue 16): as fast as a plain F.cross_entropy loop, same numbers
# ---------------------------------------------------------------------------

def test_exact_step_matches_the_plain_cross_entropy_gradient():
    """BigramLanguageModel(likelihood="exact") needs no proposal, has dense gradients by
    default (stock pyro.optim.Adam), and its loss and gradients are the plain loop's
    (N x the mean cross-entropy), through the in-place softmax backward."""
    import torch.nn.functional as F

    prev, nxt, _ = _bigram_data(N=300)
    model = BigramLanguageModel(40, 6, likelihood="exact", subsample_size=None)
    assert not model.sparse and model.num_negatives is None
    loss = Trace_ELBO().differentiable_loss(model, default_guide(model), prev, nxt)
    E, Wb = pyro.param("context"), pyro.param("output")
    ref = F.cross_entropy(F.linear(E[prev], Wb[:, :-1], Wb[:, -1]), nxt, reduction="sum")
    assert loss.item() == pytest.approx(ref.item(), rel=1e-6)
    g_lib = torch.autograd.grad(loss, [E, Wb])
    g_ref = torch.autograd.grad(ref, [E, Wb])
    for a, b in zip(g_lib, g_ref):
        assert torch.allclose(a, b, atol=1e-5)
    svi = SVI(model, default_guide(model), pyro.optim.Adam({"lr": 0.05}), Trace_ELBO())
    assert math.isfinite(svi.step(prev, nxt))


def test_exact_path_checks_utilities_through_their_log_probabilities(validation_on):
    """The model's B x K utilities are checked through the B log-probabilities (O(B)): a
    NaN output row is a named error; the labels are still checked."""
    prev, nxt, _ = _bigram_data(N=50)
    model = BigramLanguageModel(40, 6, likelihood="exact", subsample_size=None)
    model(prev, nxt)
    with torch.no_grad():
        pyro.param("output").unconstrained()[3, 0] = float("nan")
    with pytest.raises(ValueError, match="utility must be finite"):
        Trace_ELBO().loss(model, default_guide(model), prev, nxt)
    with pytest.raises(ValueError, match=r"must lie in \[0, 40\)"):
        Trace_ELBO().loss(model, default_guide(model), prev, torch.full_like(nxt, 40))


def test_softmax_log_prob_allows_one_backward_pass():
    from pyro_ar.noise.special import softmax_log_prob

    psi = torch.randn(4, 7, dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0, 6, 2, 2])
    w = torch.tensor([1.0, -2.0, 0.5, 3.0], dtype=torch.float64)  # per-row output gradients
    (g,) = torch.autograd.grad((w * softmax_log_prob(psi, y)).sum(), psi)
    (ref,) = torch.autograd.grad((w * psi.log_softmax(-1)[torch.arange(4), y]).sum(), psi)
    assert torch.allclose(g, ref, atol=1e-12)
    lp = softmax_log_prob(psi, y).sum()
    lp.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="one backward pass per forward"):
        lp.backward()


@pytest.mark.parametrize("noise", ["gumbel", "normal", "logistic"])
def test_unigram_biases_start_a_model_at_the_unigram_distribution(noise):
    """A bigram model with these biases and zero embeddings predicts the smoothed unigram
    frequencies under its own noise (its exact marginals by quadrature): the log frequencies
    for softmax; for probit not a multiple of them (0.25 log p, the earlier Brown start,
    is off by more than 0.1 in log here)."""
    from pyro_ar.models import unigram_biases

    counts = torch.tensor([500, 120, 40, 9, 3, 1, 0, 0])
    model = BigramLanguageModel(8, 2, likelihood=AR(noise),
                                init=Init(scale=0.0, bias=unigram_biases(counts, noise).float()))
    prev = torch.zeros(8, dtype=torch.long)
    lp = model.log_likelihood(prev, torch.arange(8), reduce="none")
    torch.testing.assert_close(lp.double(), unigram_log_probs(counts), atol=1e-4, rtol=0)
    if noise == "normal":
        scaled = BigramLanguageModel(8, 2, likelihood=AR(noise),
                                     init=Init(scale=0.0, bias=0.25 * unigram_log_probs(counts).float()),
                                     prefix="scaled_")
        off = scaled.log_likelihood(prev, torch.arange(8), reduce="none").double() - unigram_log_probs(counts)
        assert off.abs().max() > 0.1
