"""Quadrature marginals p(y | psi) = int phi(e) prod_{k' != y} Phi(e + psi_y - psi_k') de."""

import math
import warnings

import numpy as np
import pytest
import scipy.integrate
import scipy.stats
import torch

from pyro_ar import UtilityCategorical
from pyro_ar.noise import get_noise
from pyro_ar.quadrature import gauss_gumbel, log_marginal, log_marginal_all

from tests.helpers import BUILTIN_NOISES, DEVICES, DTYPES, make_noise

pytestmark = pytest.mark.usefixtures("seeded")


@pytest.mark.parametrize("K", [10, 100, 1000])
def test_gumbel_quadrature_matches_log_softmax(K):
    # Forced quadrature on the Gumbel noise against the closed form, logits of scale 5
    psi = 5.0 * torch.randn(8, K, dtype=torch.float64)
    y = torch.randint(K, (8,))
    y[0] = psi[0].argmax()  # the most likely class,
    y[1] = psi[1].argmin()  # the least likely one (log p ~ -30 at K = 1000)
    expected = psi.log_softmax(-1).gather(-1, y.unsqueeze(-1)).squeeze(-1)
    lp = log_marginal(psi, y, get_noise("gumbel"))
    assert (lp - expected).abs().max().item() < 1e-6
    lp = UtilityCategorical(psi, "gumbel", method="quadrature").log_prob(y)
    assert (lp - expected).abs().max().item() < 1e-6


def test_gumbel_quadrature_all_classes():
    psi = 5.0 * torch.randn(3, 30, dtype=torch.float64)
    torch.testing.assert_close(log_marginal_all(psi, get_noise("gumbel")), psi.log_softmax(-1),
                               rtol=0, atol=1e-6)
    d = UtilityCategorical(psi, "gumbel", method="quadrature")
    torch.testing.assert_close(d.logits, psi.log_softmax(-1), rtol=0, atol=1e-6)


def test_probit_two_classes_closed_form():
    # K = 2 probit: p(y = 0) = Phi((psi_0 - psi_1) / sqrt 2)
    psi = 3.0 * torch.randn(200, 2, dtype=torch.float64)
    psi[:4] = torch.tensor([[0.0, 0.0], [8.0, -8.0], [-8.0, 8.0], [1e-3, 0.0]], dtype=torch.float64)
    lp = log_marginal(psi, torch.zeros(200, dtype=torch.long), get_noise("normal"))
    z = (psi[:, 0] - psi[:, 1]) / math.sqrt(2.0)
    expected = torch.special.ndtr(z)
    assert (lp.exp() - expected).abs().max().item() < 1e-10
    # and in log space (the smallest probability here is Phi(-11.3) ~ 1e-29)
    log_expected = torch.special.log_ndtr(z)
    assert ((lp - log_expected).abs() / log_expected.abs().clamp(min=1.0)).max() < 1e-10


@pytest.mark.parametrize("name", BUILTIN_NOISES + ["student_t3"])
def test_probabilities_sum_to_one(name):
    psi = torch.cat([torch.randn(1, 50), 5.0 * torch.randn(1, 50)]).double()
    logits = UtilityCategorical(psi, make_noise(name), method="quadrature").logits
    assert logits.shape == (2, 50)
    assert (logits.exp().sum(-1) - 1.0).abs().max().item() < 1e-8


def test_laplace_noise_is_approximate_but_close():
    # A non-smooth density (kink at 0) converges only algebraically: the refinement goes
    # to its last level and may warn; the answer is still good to ~1e-5.
    psi = 3.0 * torch.randn(2, 10, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        logits = log_marginal_all(psi, make_noise("laplace"))
    assert (logits.exp().sum(-1) - 1.0).abs().max().item() < 1e-4


def _scipy_log_marginal(psi, y, name):
    """Independent reference: scipy.integrate.quad of phi(e) prod Phi(e + psi_y - psi_k)."""
    ref = {"normal": scipy.stats.norm, "logistic": scipy.stats.logistic,
           "gumbel": scipy.stats.gumbel_r, "student_t3": scipy.stats.t(3)}[name]
    d = np.delete(psi[y] - psi, y)

    def f(e):
        return math.exp(ref.logpdf(e) + ref.logcdf(e + d).sum())

    val, _ = scipy.integrate.quad(f, -np.inf, np.inf, epsabs=0, epsrel=1e-13, limit=500)
    return math.log(val)


@pytest.mark.parametrize("name", ["normal", "logistic", "student_t3"])
def test_matches_scipy_quad(name):
    psi = torch.tensor([1.0, -0.5, 2.0, 0.0, -3.0], dtype=torch.float64)
    lp = log_marginal_all(psi, make_noise(name))
    expected = [_scipy_log_marginal(psi.numpy(), k, name) for k in range(5)]
    np.testing.assert_allclose(lp.numpy(), expected, rtol=1e-9, atol=1e-9)


def test_heavy_tails_bimodal_integrand():
    # For a low-utility class, the Student-t integrand has two modes (one near the
    # density's, one where the CDFs switch on); the adaptive refinement handles it
    psi = torch.tensor([0.0, 9.0, 8.0, 7.0], dtype=torch.float64)
    lp = log_marginal_all(psi, make_noise("student_t3"))
    expected = [_scipy_log_marginal(psi.numpy(), k, "student_t3") for k in range(4)]
    np.testing.assert_allclose(lp.numpy(), expected, rtol=1e-9, atol=0)


@pytest.mark.parametrize("name", BUILTIN_NOISES + ["student_t3"])
def test_gradcheck(name):
    psi = (2.0 * torch.randn(2, 5, dtype=torch.float64)).requires_grad_()
    y = torch.tensor([0, 4])
    noise = make_noise(name)
    assert torch.autograd.gradcheck(lambda p: log_marginal(p, y, get_noise(noise)), (psi,),
                                    eps=1e-6, atol=1e-7, rtol=1e-5)


def test_gumbel_quadrature_gradient_is_softmax_gradient():
    psi = (5.0 * torch.randn(4, 100, dtype=torch.float64)).requires_grad_()
    y = torch.randint(100, (4,))
    (g,) = torch.autograd.grad(log_marginal(psi, y, get_noise("gumbel")).sum(), psi)
    (expected,) = torch.autograd.grad(psi.log_softmax(-1).gather(-1, y[:, None]).sum(), psi)
    torch.testing.assert_close(g, expected, rtol=0, atol=1e-9)
    # the gradient of log p(y) sums to zero over classes (shift invariance)
    assert g.sum(-1).abs().max().item() < 1e-9


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", BUILTIN_NOISES)
def test_float32_agrees_with_float64(name, device):
    psi = 3.0 * torch.randn(4, 20, dtype=torch.float64)
    y = torch.randint(20, (4,))
    lp64 = log_marginal(psi, y, get_noise(name))
    lp32 = log_marginal(psi.float().to(device), y.to(device), get_noise(name))
    assert lp32.dtype == torch.float32 and lp32.device.type == device
    torch.testing.assert_close(lp32.cpu().double(), lp64, rtol=1e-5, atol=1e-5)


def test_shapes_and_broadcasting():
    psi = torch.randn(3, 5, dtype=torch.float64)
    y = torch.tensor([[0], [4]])  # (2, 1) against batch (3,)
    lp = log_marginal(psi, y, get_noise("normal"))
    assert lp.shape == (2, 3)
    torch.testing.assert_close(lp[1], log_marginal(psi, torch.full((3,), 4), get_noise("normal")))
    assert log_marginal(psi[0], torch.tensor(2), get_noise("logistic")).shape == ()
    assert log_marginal_all(psi, get_noise("logistic")).shape == (3, 5)
    assert log_marginal_all(torch.randn(2, 3, 4), get_noise("normal")).shape == (2, 3, 4)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", BUILTIN_NOISES)
def test_large_utilities_finite(name, dtype):
    # |psi| up to 1e3: log p down to ~-2e6 (probit) is representable, so the value and the
    # gradient must be finite, and match float64
    psi = 1e3 * (2.0 * torch.rand(2, 8, dtype=torch.float64) - 1.0)
    psi[:, 0], psi[:, 1] = 1e3, -1e3
    y = torch.arange(8).reshape(8, 1)
    x = psi.to(dtype).requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lp = log_marginal(x, y, get_noise(name))
        (g,) = torch.autograd.grad(lp.sum(), x)
        ref = log_marginal(psi, y, get_noise(name))
    assert torch.isfinite(lp).all() and torch.isfinite(g).all()
    rel = ((lp.double() - ref).abs() / ref.abs().clamp(min=1.0)).max().item()
    assert rel < (1e-4 if dtype == torch.float32 else 1e-10)


# ---- issue 12: named errors instead of errors from inside torch -----------------------------
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("noise", ["normal", "logistic"])
def test_half_precision_is_refused_by_name(noise, dtype):
    psi = torch.randn(2, 3).to(dtype)
    with pytest.raises(ValueError, match=rf"utility must be float32 or float64 .* dtype={dtype}"):
        UtilityCategorical(psi, noise)
    with pytest.raises(ValueError, match="utility must be float32 or float64"):
        log_marginal(psi, torch.tensor([0, 1]), get_noise(noise))
    # Gumbel noise is a closed form: half precision works there
    assert UtilityCategorical(psi, "gumbel").log_prob(torch.tensor([0, 1])).dtype == dtype


@pytest.mark.parametrize("noise", ["normal", "logistic"])
def test_empty_batch_gives_empty_log_probs(noise):
    """Issue 12: was ``torch.cat(): expected a non-empty list``."""
    psi = torch.randn(0, 4, requires_grad=True)
    d = UtilityCategorical(psi, noise)
    lp = d.log_prob(torch.zeros(0, dtype=torch.long))
    assert lp.shape == (0,)
    assert d.logits.shape == (0, 4) and log_marginal_all(psi, get_noise(noise)).shape == (0, 4)
    lp.sum().backward()  # still part of the graph
    assert psi.grad.shape == (0, 4)


@pytest.mark.parametrize("bad", [0, -3, 4, None, 2.5, True, "257", 10 ** 7])
def test_num_nodes_is_validated(bad):
    with pytest.raises(ValueError, match=r"num_nodes must be an integer in \[5, 4097\], got num_nodes="):
        UtilityCategorical(torch.randn(2, 3), "normal", num_nodes=bad)
    with pytest.raises(ValueError, match="num_nodes must be"):
        log_marginal(torch.randn(2, 3), torch.tensor([0, 1]), get_noise("normal"), num_nodes=bad)


def test_num_nodes_accepts_numpy_integers():
    psi = torch.randn(2, 3, dtype=torch.float64)
    a = UtilityCategorical(psi, "normal", num_nodes=np.int64(65)).log_prob(torch.tensor([0, 1]))
    b = UtilityCategorical(psi, "normal", num_nodes=65).log_prob(torch.tensor([0, 1]))
    assert torch.equal(a, b)


def test_the_engine_takes_a_noise_object_not_a_name():
    # the quadrature sits below pyro_ar.noise: names are resolved there (get_noise), and the
    # noise's own log_marginal is the public entry (closed form where there is one)
    psi, y = torch.randn(2, 3, dtype=torch.float64), torch.tensor([0, 1])
    with pytest.raises(ValueError, match="noise must be a pyro_ar.Noise"):
        log_marginal(psi, y, "normal")
    torch.testing.assert_close(get_noise("normal").log_marginal(psi, y), log_marginal(psi, y, get_noise("normal")))


# ---- every class at once through the maximum, and its inverse (offsets for given marginals)
@pytest.mark.parametrize("name", BUILTIN_NOISES)
def test_marginals_via_the_maximum_match_the_quadrature(name):
    """p_k = int G(t) h_k(t) dt over one grid of t (O(K x nodes)) is the same number as the
    per-class quadrature of eq. 5 (O(K^2 x nodes)): rows of spread utilities, float64."""
    from pyro_ar.max_quadrature import log_marginal_all_via_max

    noise = get_noise(name)
    psi = 3.0 * torch.randn(3, 9, dtype=torch.float64)
    fast = log_marginal_all_via_max(psi, noise)
    assert fast.shape == psi.shape
    torch.testing.assert_close(fast, log_marginal_all(psi, noise), atol=1e-9, rtol=0)
    one = log_marginal_all_via_max(psi[0].float(), noise)  # one row, float32 in and out
    assert one.dtype == torch.float32 and one.shape == (9,)


@pytest.mark.parametrize("name", ["normal", "logistic"])
@pytest.mark.parametrize("K", [2, 9, 40])
def test_marginal_offsets_give_the_marginals_asked_for(name, K):
    """The offsets' marginals by the independent quadrature (pyro_ar.quadrature.log_marginal_all)
    are the probabilities asked for, within the solver's tol (1e-6 in log) plus the quadrature's
    error; K = 2 is where a plain diagonal Newton step overshoots by a factor 2 (it oscillated)."""
    noise = get_noise(name)
    log_p = (2.0 * torch.randn(K, dtype=torch.float64)).log_softmax(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # converged: no warning
        b = noise.marginal_offsets(log_p)
    torch.testing.assert_close(log_marginal_all(b, noise), log_p, atol=2e-6, rtol=0)
    assert abs(b.mean().item() - log_p.mean().item()) < 1e-12   # the constant: the mean of log_p


def test_marginal_offsets_of_the_gumbel_noise_are_the_log_probs():
    log_p = torch.tensor([0.6, 0.3, 0.1]).log()
    b = get_noise("gumbel").marginal_offsets(log_p)
    assert torch.equal(b, log_p) and b is not log_p


@pytest.mark.parametrize("name", ["gumbel", "normal"])
def test_marginal_offsets_refuse_what_are_not_log_probs_by_name(name):
    noise = get_noise(name)
    with pytest.raises(ValueError, match=r"log_probs must be finite log-probabilities .* = 0.693"):
        noise.marginal_offsets(torch.tensor([1.0, 1.0]).log())             # sums to 2
    with pytest.raises(ValueError, match=r"log_probs must be a float tensor of shape \(K,\), got \(1, 2\)"):
        noise.marginal_offsets(torch.tensor([[0.5, 0.5]]).log())


def test_marginals_via_the_maximum_warn_on_heavy_tails():
    """Equal steps cannot cover a Student-t maximum's polynomial tail: the half-grid check
    says so (a RuntimeWarning) instead of returning a silently wrong number."""
    from pyro_ar.max_quadrature import log_marginal_all_via_max

    psi = torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64)
    with pytest.warns(RuntimeWarning, match="are the noise's tails light"):
        log_marginal_all_via_max(psi, get_noise("student_t3"))


# ---------------------------------------------------------------- the Gumbel's Gauss rule
def _gumbel_moments(n):
    """E[z^p] of the standard Gumbel for p < n, from its cumulants kappa_1 = Euler's gamma,
    kappa_p = (p - 1)! zeta(p), by m_p = sum_k C(p-1, k-1) kappa_k m_{p-k}."""
    from scipy.special import zeta

    kappa = [None, 0.5772156649015329] + [math.factorial(k - 1) * float(zeta(k)) for k in range(2, n)]
    m = [1.0]
    for p in range(1, n):
        m.append(sum(math.comb(p - 1, k - 1) * kappa[k] * m[p - k] for k in range(1, p + 1)))
    return m


@pytest.mark.parametrize("num_nodes", [1, 2, 3, 5, 12, 20])
def test_gauss_gumbel_is_exact_for_polynomials_below_twice_its_nodes(num_nodes):
    """The n-point rule reproduces the Gumbel's moments of order below 2n (from its cumulants,
    independently of the discretised Stieltjes procedure that builds it) to a relative 1e-12;
    its weights are positive and its nodes increasing."""
    z, w = gauss_gumbel(num_nodes, torch.zeros((), dtype=torch.float64))
    moments = _gumbel_moments(2 * num_nodes)
    for p, m in enumerate(moments):
        assert abs((w * z ** p).sum().item() - m) <= 1e-12 * max(1.0, abs(m)), (p, m)
    assert (w > 0).all() and (z.diff() > 0).all()


def test_gauss_gumbel_follows_like_and_names_bad_sizes():
    z, w = gauss_gumbel(4, torch.zeros((), dtype=torch.float32))
    assert z.dtype == w.dtype == torch.float32 and z.shape == w.shape == (4,)
    for bad in (0, 21, 2.5):
        with pytest.raises(ValueError, match="num_nodes"):
            gauss_gumbel(bad, torch.zeros(()))


@pytest.mark.parametrize("rule", ["gauss_gumbel", "gauss_hermite"])
@pytest.mark.parametrize("like", [torch.zeros(2, dtype=torch.long), None, 0.0])
def test_rules_need_a_floating_like(rule, like):
    """An integer ``like`` gave integer nodes and zero weights; None failed inside (issue 38)."""
    import pyro_ar.quadrature as q

    with pytest.raises(ValueError, match=r"like must be a floating torch tensor"):
        getattr(q, rule)(5, like)
