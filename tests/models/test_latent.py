"""CategoricalLatentModel: shapes and plates, unbiased subsampled bounds, amortised vs
per-session posterior, the ELBO improves, named errors."""

import pytest
import torch

import pyro
import pyro.poutine as poutine
from pyro.infer import SVI

from pyro_ar.infer import LatentGuide, LatentKLWarmup, default_elbo, default_guide
from pyro_ar.likelihoods import AR, Bouchard, Exact, GaussianBouchard
from pyro_ar.models import MAP, CategoricalLatentModel, LocalPosterior
from pyro_ar.negatives import LabelHeadNegatives, SharedNegatives
from pyro_ar.optim import lazy_adam

pytestmark = pytest.mark.usefixtures("seeded", "one_thread")


def _sessions(U=40, P=30, Q=2, T=6, seed=0):
    """Sessions drawn from the model itself (scale 2 item embeddings), half of them shorter."""
    g = torch.Generator().manual_seed(seed)
    Psi, rho = 2 * torch.randn(P, Q, generator=g), torch.randn(P, generator=g)
    omega = torch.randn(U, Q, generator=g)
    probs = (omega @ Psi.T + rho).softmax(-1)
    items = torch.multinomial(probs, T, replacement=True, generator=g)
    items[: U // 2, T // 2:] = -1
    return items, Psi, rho


def _trace(model, items):
    guide = default_guide(model)
    gtr = poutine.trace(guide).get_trace(items)
    return gtr, poutine.trace(poutine.replay(model, trace=gtr)).get_trace(items)


@pytest.mark.parametrize("likelihood,kwargs", [
    (AR(negatives=SharedNegatives(5)), {}),
    (GaussianBouchard("local", SharedNegatives(5)), {}),               # analytic
    (Bouchard("local", 5), {"utility": "neural"}),                        # sampled
    (Exact(), {"posterior": LocalPosterior(40, 3, 30)}),
])
def test_shapes_and_plates(likelihood, kwargs):
    items, _, _ = _sessions()
    model = CategoricalLatentModel(30, 3, likelihood, subsample_size=8, hidden_dim=16, **kwargs)
    gtr, mtr = _trace(model, items)
    assert gtr.nodes["omega"]["value"].shape == (8, 1, 3)
    site = mtr.nodes["v"]
    assert site["fn"].batch_shape == (8, 6)
    frames = {f.name: (f.dim, f.full_size or f.size) for f in site["cond_indep_stack"]}
    assert frames == {"sessions": (-2, 40), "items": (-1, 6)}
    idx = mtr.nodes["sessions"]["value"]
    assert torch.equal(site["mask"], items[idx] >= 0)       # padding masked out
    assert ("v_eps" in gtr.nodes) == isinstance(likelihood, AR)
    if "v_eps" in gtr.nodes:
        assert gtr.nodes["v_eps"]["fn"].batch_shape == (8, 6) and torch.equal(gtr.nodes["v_eps"]["mask"], site["mask"])


@pytest.mark.parametrize("make", [
    lambda s: AR(negatives=s),
    lambda s: Bouchard("local", s),
])
def test_subsampled_bound_is_unbiased(make):
    """The subsampled class sum at fixed latents (omega, eps) is unbiased for the full sum."""
    items, Psi, rho = _sessions(U=10, P=200, T=4)
    full = CategoricalLatentModel(200, 2, make(None), hidden_dim=8)
    sub = CategoricalLatentModel(200, 2, make(SharedNegatives(10)), hidden_dim=8)
    sub.posterior = full.posterior                       # the same a_u, mu_u, sigma_u
    gtr, _ = _trace(full, items)
    latents = {n: gtr.nodes[n]["value"] for n in ("omega", "v_eps") if n in gtr.nodes}

    def bound(model):
        tr = poutine.trace(poutine.condition(model, data=latents)).get_trace(items)
        return tr.nodes["v"]["fn"].log_prob(tr.nodes["v"]["value"]).detach()  # (U, T)

    exact = bound(full)
    draws = torch.stack([bound(sub) for _ in range(200)])
    mean, se = draws.mean(0), draws.std(0) / 200 ** 0.5
    # 4.5 standard errors per entry (40 entries): a false alarm has probability < 1e-3
    mask = items >= 0
    assert ((mean - exact).abs() <= 4.5 * se + 1e-4)[mask].all()
    assert (se[mask] > 0).all()                           # the estimate does vary


def _fit_posterior(posterior, items, Psi, rho, steps=150):
    """Fit q(omega) only (Psi, rho held at the truth) with the exact likelihood; full batch."""
    pyro.clear_param_store()
    if posterior == "local":
        posterior = LocalPosterior(len(items), Psi.shape[1], Psi.shape[0])
    model = CategoricalLatentModel(Psi.shape[0], Psi.shape[1], Exact(), posterior=posterior, hidden_dim=32)
    pyro.param("weight", Psi.clone())
    pyro.param("bias", rho.clone())
    frozen = poutine.block(model, hide=["weight", "bias"])   # not optimised
    svi = SVI(frozen, default_guide(model), lazy_adam({"lr": 0.05}), default_elbo())
    for _ in range(steps):
        svi.step(items)
    loss = sum(svi.evaluate_loss(items) for _ in range(10)) / 10
    loc, _, _ = model.posterior(torch.arange(len(items)), items)
    return loss, loc.detach()


def test_amortised_and_local_posteriors_agree():
    items, Psi, rho = _sessions(U=30, P=20, Q=2, T=8)
    loss_a, mu_a = _fit_posterior("amortised", items, Psi, rho)
    loss_l, mu_l = _fit_posterior("local", items, Psi, rho)
    # the ELBOs agree to 3% (measured 2.5%: the amortisation gap after 150 steps; MC noise of
    # 10 evaluations ~0.5%) and the means to 25% of their norm (measured 20%)
    assert abs(loss_a - loss_l) < 0.03 * abs(loss_l)
    assert (mu_a - mu_l).norm() < 0.25 * mu_l.norm()


def test_elbo_improves_with_ar():
    items, _, _ = _sessions(U=60, P=40, Q=2, T=8)
    model = CategoricalLatentModel(40, 2, AR(negatives=SharedNegatives(10)), subsample_size=20, hidden_dim=16)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.03}), default_elbo())

    def elbo():
        return -sum(svi.evaluate_loss(items) for _ in range(10)) / 10

    before = elbo()
    for _ in range(200):
        svi.step(items)
    after = elbo()
    T = int((items >= 0).sum())
    assert after > before + 0.3 * T                           # 0.3 nats per observed item
    logp = model.scores(items).log_softmax(-1).gather(1, items.clamp(min=0))[items >= 0]
    assert logp.mean() > -torch.log(torch.tensor(40.0)) + 0.3  # better than uniform


def test_scores_sampled_is_a_log_distribution():
    items, _, _ = _sessions()
    model = CategoricalLatentModel(30, 2, Exact(), hidden_dim=8)
    s = model.scores(items[:4], num_samples=8)
    assert s.shape == (4, 30) and torch.allclose(s.logsumexp(-1), torch.zeros(4), atol=1e-5)


@pytest.mark.parametrize("kwargs,items,match", [
    ({}, torch.zeros(3, 2), "items must be a 2-D integer tensor"),
    ({}, torch.tensor([[0, 30]]), r"items must lie in \[0, 30\)"),
    ({"posterior": "local"}, None, "num_sessions"),
    ({"utility": "deep"}, None, "utility must be one of"),
    ({"weights": "bayes"}, None, "weights=.*'bayes'"),
    (lambda: {"weights": MAP(penalize_bias=1)}, None, "penalize_bias must be True, False or None"),
    (lambda: {"weights": MAP(prior_scale=-1.0)}, None, "prior_scale must be"),
])
def test_named_errors(kwargs, items, match):
    with pytest.raises(ValueError, match=match):
        model = CategoricalLatentModel(30, 2, **(kwargs() if callable(kwargs) else kwargs))
        model(items)


def test_local_posterior_refuses_new_sessions():
    items, _, _ = _sessions()
    model = CategoricalLatentModel(30, 2, Exact(), posterior=LocalPosterior(40, 2, 30))
    assert isinstance(default_guide(model), LatentGuide)
    with pytest.raises(ValueError, match="training sessions only"):
        model.scores(items[:5])


def test_kl_warmup_scales_the_latent_terms_only_and_reaches_the_elbo():
    """beta scales log p(omega) - log q(omega) (model and guide sites), not the likelihood; the
    weight rises linearly to 1 in num_steps and is restored from a checkpoint state."""
    items, _, _ = _sessions()
    model = CategoricalLatentModel(30, 2, AR(negatives=SharedNegatives(5)))
    warmup = LatentKLWarmup(model, num_steps=4)
    assert model.latent_kl_weight == 0.25
    guide_tr = poutine.trace(default_guide(model)).get_trace(items)
    model_tr = poutine.trace(poutine.replay(model, trace=guide_tr)).get_trace(items)
    for tr in (guide_tr, model_tr):
        assert tr.nodes["omega"]["scale"] == 0.25
    assert model_tr.nodes["v"]["scale"] == 1.0 and guide_tr.nodes["v_eps"]["scale"] == 1.0
    for _ in range(6):
        warmup.step()
    assert model.latent_kl_weight == 1.0
    LatentKLWarmup(model, 4).set_state({"step": 2})
    assert model.latent_kl_weight == 0.5


@pytest.mark.parametrize("kwargs, match", [({"num_steps": 0}, "num_steps"), ({"num_steps": 2.5}, "num_steps")])
def test_kl_warmup_named_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LatentKLWarmup(CategoricalLatentModel(30, 2), **kwargs)
    with pytest.raises(ValueError, match="CategoricalLatentModel"):
        LatentKLWarmup(object(), 3)


def test_guide_local_step_sums_over_all_classes_when_they_are_few():
    """At most ``all_classes_upto`` classes: q(eps) = Gumbel(log(1 + S), 1) with S the exact sum
    of exp(psi_k - psi_y) over the other classes (the closed form); more: the model's sampler."""
    items, _, _ = _sessions()
    model = CategoricalLatentModel(30, 2, AR(negatives=SharedNegatives(5)))
    guide = default_guide(model)
    tr = poutine.trace(guide).get_trace(items)
    omega = tr.nodes["omega"]["value"]
    psi = model.minibatch_utility(omega, model.fitted_parameters()).full()      # (U, 1, P)
    v = items.clamp(min=0)
    psi_y = psi.expand(-1, v.shape[1], -1).gather(-1, v.unsqueeze(-1))
    log_s = (psi - psi_y).scatter(-1, v.unsqueeze(-1), float("-inf")).logsumexp(-1)
    # the same float32 sums in another order: agreement to rounding (1e-5 on values of order 1-5)
    assert torch.allclose(tr.nodes["v_eps"]["fn"].loc, torch.nn.functional.softplus(log_s), atol=1e-5)
    assert guide.site_sampler(None, 30).num_negatives is None
    sampler = LatentGuide(model, all_classes_upto=10).site_sampler(None, 30)   # stratified (issue 27)
    assert isinstance(sampler, LabelHeadNegatives) and sampler.base is model.likelihood.sampler
    assert LatentGuide(model, all_classes_upto=10, label_head=False).site_sampler(None, 30) \
        is model.likelihood.sampler
    with pytest.raises(ValueError, match="all_classes_upto"):
        LatentGuide(model, all_classes_upto=0)


def test_guide_is_exact_for_gumbel_where_cheap():
    """Issue 27 (the Brown session model collapsed after 22,200 steps at 100 of 26,101 words: the
    guide's own draw missed a class that the model's draw held, and the bound's term
    (1 + S_hat)/(1 + S_hat') exploded). For Gumbel noise the default guide now uses the exact
    local optimum log eta = log sum_k exp(psi_k) - psi_y (one K-row of utilities per session)
    wherever that costs at most EXACT_COST_RATIO times the model's class sum; before, above 64
    classes, it always used a subsampled estimate. Probit keeps 64 (its local fit over all classes
    costs O(K) per item)."""
    from pyro_ar.infer import EXACT_COST_RATIO

    items, _, _ = _sessions(U=8, P=2000, T=5)
    model = CategoricalLatentModel(2000, 3, AR(negatives=SharedNegatives(50)))
    guide = default_guide(model)
    assert 8 * 2000 <= EXACT_COST_RATIO * 8 * 5 * 50          # the exact sum is cheap here
    tr = poutine.trace(guide).get_trace(items)
    psi = model.minibatch_utility(tr.nodes["omega"]["value"], model.fitted_parameters()).full()   # (U, 1, P)
    v = items.clamp(min=0)
    neg_log_p = -psi.log_softmax(-1).expand(-1, v.shape[1], -1).gather(-1, v.unsqueeze(-1)).squeeze(-1)
    # log(1 + S_y) = -log p(y | omega): float32 sums in another order, agreement to rounding
    assert torch.allclose(tr.nodes["v_eps"]["fn"].loc, neg_log_p, atol=1e-4)
    # the Brown sessions (64 x 30 items, 100 negatives, 26,101 words): exact; one item per row
    # (a latent GP on word windows): the model's sampler, stratified
    brown = CategoricalLatentModel(26101, 3, AR(negatives=SharedNegatives(100)))
    assert default_guide(brown).site_sampler(None, 26101, 64, 64 * 30).num_negatives is None
    assert isinstance(default_guide(brown).site_sampler(None, 26101, 64, 64), LabelHeadNegatives)
    # an explicit all_classes_upto is the threshold alone (no cost rule)
    assert isinstance(LatentGuide(brown, all_classes_upto=64).site_sampler(None, 26101, 64, 64 * 30),
                      LabelHeadNegatives)
    probit = CategoricalLatentModel(2000, 3, AR("probit", negatives=SharedNegatives(50)))
    assert isinstance(LatentGuide(probit).site_sampler(None, 2000, 8, 40), LabelHeadNegatives)


def test_exact_log_eta_is_one_row_per_session():
    """The exact Gumbel local optimum sums a utility's own rows (U, 1, K), never the (U, T, K)
    broadcast over the items: equal to the per-item sum, with U * K utilities evaluated."""
    from pyro_ar.infer.local_fit import conditional_local_q
    from pyro_ar.noise import get_noise
    from pyro_ar.utility import LinearUtility

    g = torch.Generator().manual_seed(0)
    U, T, K, Q = 3, 7, 500, 4
    x = torch.randn(U, 1, Q, generator=g, dtype=torch.float64)
    W, b = torch.randn(K, Q, generator=g, dtype=torch.float64), torch.randn(K, generator=g, dtype=torch.float64)
    labels = torch.randint(0, K, (U, T), generator=g)
    calls = []

    class Counting(LinearUtility):
        def full(self):
            out = super().full()
            calls.append(out.shape)
            return out

    q, _ = conditional_local_q(get_noise("gumbel"), Counting(x, W, b), labels, SharedNegatives(None))
    full = (x @ W.T + b).expand(U, T, K)
    expected = torch.logsumexp(full, -1) - full.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(q.loc, expected)
    assert calls == [torch.Size([U, 1, K])]


def test_kl_warmup_resumes_from_a_checkpoint(tmp_path):
    """``train(..., scheduler=warmup, checkpoint=...)`` saves beta's step; a resumed run goes on from it."""
    from pyro_ar.infer import train

    items, _, _ = _sessions()
    path = tmp_path / "run.pt"
    for steps in (5, 10):
        pyro.clear_param_store()
        model = CategoricalLatentModel(30, 2, AR(negatives=SharedNegatives(5)))
        warmup = LatentKLWarmup(model, 20)
        svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.01}), default_elbo())
        train(svi, items, num_steps=steps, scheduler=warmup, checkpoint=path)
        assert warmup.t == steps and model.latent_kl_weight == steps / 20


def test_log_likelihood_of_heldout_items_is_the_log_softmax_at_the_posterior_mean():
    """num_samples=0: log p(y | psi(E_q omega)) of each held-out item, exactly the log-softmax
    of the session's scores (utilities at q's mean); draws: log mean_s p(y | psi(omega_s))
    over the same seeded draws whatever the call, with the global RNG left alone."""
    items, _, _ = _sessions()
    model = CategoricalLatentModel(30, 2, AR(negatives=SharedNegatives(5)), hidden_dim=8)
    model(items)
    heldout = items.flip(-1)[:, :2].clone()
    heldout[::4, 1] = -1
    got = model.log_likelihood(items, heldout, reduce="none")
    expected = model.scores(items).double().log_softmax(-1).gather(-1, heldout.clamp(min=0))[heldout >= 0]
    torch.testing.assert_close(got, expected.to(got.dtype), atol=1e-5, rtol=0)
    state = torch.get_rng_state()
    draws = [model.log_likelihood(items, heldout, num_samples=3, seed=7) for _ in range(2)]
    assert torch.equal(torch.get_rng_state(), state) and draws[0] == draws[1]
    assert model.evaluate(items, heldout, ("log_lik",), num_samples=3, seed=7)["log_lik"] == draws[0]
    with pytest.raises(ValueError, match="no held-out entry"):
        model.log_likelihood(items, torch.full_like(heldout, -1))


@pytest.mark.parametrize("kwargs, scale, with_bias", [
    ({}, 0.5, False),                                        # the default: MAP, s = 1/sqrt(Q), Psi only
    ({"weights": MAP(prior_scale=2.0, penalize_bias=True)}, 2.0, True),
    ({"utility": "neural", "hidden_dim": 16}, 0.25, False),  # s = 1/sqrt(width of the features)
])
def test_default_item_embeddings_are_map_under_a_unit_variance_prior(kwargs, scale, with_bias):
    """The model's default (issue 27: ML embeddings overfit Brown sessions) is MAP with
    Psi_pq ~ N(0, s^2): the trace's prior factor is sum log N(Psi; 0, s^2) (all items when the
    likelihood sums every class), with the offsets rho in it only with penalize_bias."""
    items, _, _ = _sessions()
    model = CategoricalLatentModel(30, 4, Exact(), **kwargs)
    assert model.weights == "map" and model.prior_scale == scale
    _, mtr = _trace(model, items)
    params = model.fitted_parameters()
    normal = torch.distributions.Normal(0.0, scale)
    expected = normal.log_prob(params["weight"]).sum() + (normal.log_prob(params["bias"]).sum() if with_bias else 0)
    torch.testing.assert_close(mtr.nodes["weight_prior"]["fn"].log_factor, expected, rtol=1e-6, atol=1e-4)


def test_map_prior_estimate_on_an_item_subsample_is_unbiased_and_leaves_the_offsets_out():
    """With s negatives the factor is (P/s) sum over a uniform s-subset: its mean over 4,000
    draws matches the exact sum over Psi within 4 standard errors (the draws' own)."""
    model = CategoricalLatentModel(30, 2, AR(negatives=SharedNegatives(5)))
    g = torch.Generator().manual_seed(1)
    params = {"weight": torch.randn(30, 2, generator=g), "bias": torch.full((30,), -8.0)}
    draws = torch.stack([model.log_prior_estimate(params) for _ in range(4000)])
    exact = torch.distributions.Normal(0.0, model.prior_scale).log_prob(params["weight"]).sum()
    assert abs(float(draws.mean() - exact)) < 4 * float(draws.std()) / 4000 ** 0.5


def test_mle_item_embeddings_have_no_prior_factor():
    items, _, _ = _sessions()
    _, mtr = _trace(CategoricalLatentModel(30, 2, Exact(), weights="mle"), items)
    assert "weight_prior" not in mtr.nodes


@pytest.mark.parametrize("num_samples", [0, 3])
def test_probit_sessions_are_evaluated_with_the_probit_marginal(num_samples):
    """A probit latent model's session log-likelihood is that of its own noise: at the mean,
    log p(item | scores) by the normal marginal (not the log-softmax of the utilities, which
    differs by far more than the tolerance); with draws, the scores are log mean_s of the
    normal marginal, normalised. The same as log_likelihood's one evaluation path."""
    from pyro_ar.noise import get_noise

    items, _, _ = _sessions()
    model = CategoricalLatentModel(30, 2, AR("normal", negatives=SharedNegatives(5)), hidden_dim=8)
    model(items)
    observed, heldout = items[:, :3].clone(), items[:, 3:].clone()
    observed[observed < 0] = 0
    pyro.set_rng_seed(0)
    got = model.evaluate_sessions(observed, heldout, num_samples=num_samples)["log_lik"]
    pyro.set_rng_seed(0)
    scores = model.scores(observed, num_samples).double()
    mask = heldout >= 0
    rows = torch.arange(len(heldout)).unsqueeze(-1).expand_as(heldout)[mask]
    if num_samples:
        assert torch.allclose(scores.logsumexp(-1), torch.zeros(len(scores), dtype=scores.dtype), atol=1e-6)
        expected = scores[rows, heldout[mask]].mean().item()
    else:
        expected = get_noise("normal").log_marginal(scores[rows], heldout[mask]).mean().item()
        assert model.log_likelihood(observed, heldout) == pytest.approx(expected, abs=1e-5)
    softmax = scores.log_softmax(-1)[rows, heldout[mask]].mean().item()
    assert got == pytest.approx(expected, abs=1e-6)
    if not num_samples:
        assert abs(softmax - expected) > 1e-4  # the softmax of probit utilities is another model
