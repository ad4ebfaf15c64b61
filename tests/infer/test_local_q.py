"""One local optimum: every guide's q(eps) is pyro_ar.infer.local_fit.local_q of its class terms.

local_q is checked against the closed form computed here from scratch (Gumbel noise) and
against the local fits (other noises); each guide -- ConditionalLocalGuide, the latent model's
guide (through conditional_local_q), ClassSubsampledNormal's W-conditioned guide and
GumbelLocalGuide's natural step -- is then checked to give local_q's q on the same utilities
(every class, so that no class subsample differs between the two). Deterministic, float64:
the tolerances are rounding only.
"""

import pytest
import torch

import pyro
import pyro.poutine as poutine
from pyro.infer import SVI

from pyro_ar.datasets import make_linear_teacher
from pyro_ar.infer import ClassSubsampledNormal, ClosedFormELBO, GumbelLocalGuide
from pyro_ar.infer.local_fit import conditional_local_q, gumbel_local, laplace_local, local_q
from pyro_ar.infer.local_guides import ConditionalLocalGuide
from pyro_ar.models import BayesianLinearClassifier, LinearClassifier
from pyro_ar.negatives import SharedNegatives
from pyro_ar.noise import get_noise
from pyro_ar.likelihoods import AR

pytestmark = pytest.mark.usefixtures("seeded")


def _terms(B=5, K=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    psi = 2.0 * torch.randn(B, K, generator=g, dtype=torch.float64)
    y = torch.randint(0, K, (B,), generator=g)
    d = psi.gather(-1, y[:, None]) - psi                       # psi_y - psi_k, every class
    w = torch.ones_like(d).scatter(-1, y[:, None], 0.0)        # the label's own term dropped
    return psi, y, d, w


def test_local_q_gumbel_is_the_closed_form():
    psi, y, d, w = _terms()
    q, infer = local_q(get_noise("gumbel"), d, w)
    expected = -psi.log_softmax(-1).gather(-1, y[:, None]).squeeze(-1)   # log(1 + S_y) = -log p(y)
    torch.testing.assert_close(q.loc, expected, rtol=0, atol=1e-12)
    assert bool((q.scale == 1).all()) and infer  # marked a unit Gumbel for ClosedFormELBO
    q2, _ = local_q(get_noise("gumbel"), log_s=torch.log(torch.expm1(expected)))
    torch.testing.assert_close(q2.loc, expected, rtol=0, atol=1e-12)


def test_local_q_gumbel_row_without_terms_is_finite_with_zero_gradient():
    d = torch.zeros(2, 3, dtype=torch.float64, requires_grad=True)
    q, _ = local_q(get_noise("gumbel"), d, torch.zeros(2, 3, dtype=torch.float64))
    q.loc.sum().backward()
    assert torch.equal(q.loc.detach(), torch.zeros(2, dtype=torch.float64))
    assert torch.equal(d.grad, torch.zeros_like(d))


@pytest.mark.parametrize("fit,fn", [("laplace", laplace_local), ("gumbel", gumbel_local)])
def test_local_q_other_noise_is_the_local_fit(fit, fn):
    _, _, d, w = _terms()
    q, infer = local_q(get_noise("normal"), d, w, fit=fit)
    loc, scale = fn(get_noise("normal"), d, w, 8, **({} if fit == "laplace" else {"refine_steps": 1}))
    torch.testing.assert_close(q.loc, loc)
    torch.testing.assert_close(q.scale, scale)
    assert infer == {}


@pytest.mark.parametrize("noise", ["gumbel", "normal"])
def test_conditional_local_q_over_every_class_is_local_q(noise):
    psi, y, d, w = _terms()
    nz = get_noise(noise)
    q, _ = conditional_local_q(nz, psi, y, SharedNegatives(None))
    expected, _ = local_q(nz, d, w)
    torch.testing.assert_close(q.loc, expected.loc, rtol=0, atol=1e-10)
    torch.testing.assert_close(q.scale, expected.scale, rtol=0, atol=1e-10)


def _linear_case(noise, K=7, N=20, D=3):
    data = make_linear_teacher(N, D, K, noise, seed=0)
    return data.x.double(), data.y


@pytest.mark.parametrize("noise", ["gumbel", "normal"])
def test_conditional_local_guide_is_local_q(noise):
    x, y = _linear_case(noise)
    model = LinearClassifier(3, 7, likelihood=AR(noise, negatives=2))
    guide = ConditionalLocalGuide(model, negatives=None)
    tr = poutine.trace(guide).get_trace(x, y)
    psi = model.utility(x).full()
    d = psi.gather(-1, y[:, None]) - psi
    w = torch.ones_like(d).scatter(-1, y[:, None], 0.0)
    expected, _ = local_q(model.noise, d, w)
    q = tr.nodes["y_eps"]["fn"]
    torch.testing.assert_close(q.loc, expected.loc, rtol=0, atol=1e-10)
    torch.testing.assert_close(q.scale, expected.scale, rtol=0, atol=1e-10)


@pytest.mark.parametrize("noise,fit", [("gumbel", "laplace"), ("normal", "laplace"), ("normal", "gumbel")])
def test_class_subsampled_normal_local_guide_is_local_q(noise, fit):
    x, y = _linear_case(noise)
    model = BayesianLinearClassifier(3, 7, likelihood=AR(noise))          # num_negatives=None: every class
    guide = ClassSubsampledNormal(model, fit=fit)
    tr = poutine.trace(guide).get_trace(x.float(), y)
    W, b = tr.nodes["weight"]["value"], tr.nodes["bias"]["value"]
    C = guide.last_classes
    psi = torch.empty(len(y), 7, dtype=W.dtype)
    psi[:, C] = x.float() @ W.T + b                             # the drawn rows, in class order
    d = psi.gather(-1, y[:, None]) - psi
    w = torch.ones_like(d).scatter(-1, y[:, None], 0.0)
    expected, _ = local_q(model.noise, d, w, fit=fit)
    q = tr.nodes[model.eps_site]["fn"]
    torch.testing.assert_close(q.loc, expected.loc, rtol=1e-5, atol=1e-5)    # float32 sums
    torch.testing.assert_close(q.scale, expected.scale, rtol=1e-5, atol=1e-5)


def test_gumbel_local_guide_natural_step_moves_to_local_q():
    """At a first visit (rho = 1) the natural step sets log eta to local_q's location."""
    x, y = _linear_case("gumbel")
    model = LinearClassifier(3, 7, likelihood=AR())
    guide = GumbelLocalGuide(model, create_plates=model.create_plates)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.0}), ClosedFormELBO())
    svi.step(x, y)
    psi = model.utility(x).full()
    d = psi.gather(-1, y[:, None]) - psi
    w = torch.ones_like(d).scatter(-1, y[:, None], 0.0)
    expected, _ = local_q(model.noise, d, w)
    torch.testing.assert_close(guide.log_eta("y_eps").detach(), expected.loc, rtol=0, atol=1e-10)
