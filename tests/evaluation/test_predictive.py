"""pyro_ar.evaluation: closed forms, chunk-size and shared-row invariance, float64 accuracy,
posterior draws, named errors for bad input (issue 12 item 2), and metrics.bound's."""

import math

import pytest
import torch

import pyro_ar as ar
from pyro_ar import evaluation as ev, metrics
from tests.helpers import DEVICES

pytestmark = pytest.mark.usefixtures("seeded")

CHUNKS = [1, 3, 7, 64, None]


def _problem(n=23, k=6, dtype=torch.float64, scale=2.0):
    psi = scale * torch.randn(n, k, dtype=dtype)
    return psi, torch.randint(0, k, (n,))


def _draws(table):
    """A callable source returning fixed S draws of (R, K) utilities: ids -> (S, B, K)."""
    return lambda ids: table[:, ids]


# ---------------------------------------------------------------- closed forms
def test_gumbel_is_log_softmax():
    psi, y = _problem()
    exact = psi.log_softmax(-1)
    assert torch.allclose(ev.predict_log_proba(psi), exact, atol=1e-14)
    lp = ev.log_likelihood(psi, y, reduce="none")
    assert torch.allclose(lp, exact[torch.arange(len(y)), y], atol=1e-14)
    assert ev.log_likelihood(psi, y) == pytest.approx(lp.mean().item(), abs=1e-14)
    assert ev.log_likelihood(psi, y, reduce="sum") == pytest.approx(lp.sum().item(), abs=1e-12)


@pytest.mark.parametrize("noise", ["normal", "logistic"])
def test_quadrature_sums_to_one_and_label_path_agrees(noise):
    psi, y = _problem(n=9, k=5)
    lp = ev.predict_log_proba(psi, noise)
    assert torch.allclose(lp.exp().sum(-1), torch.ones(9, dtype=torch.float64), atol=1e-9)
    # the label path (log_marginal, O(K) per point) agrees with the all-class path (O(K^2))
    assert torch.allclose(ev.log_likelihood(psi, y, noise, reduce="none"), lp[torch.arange(9), y], atol=1e-10)


def test_two_class_probit_closed_form():
    # K = 2, normal noise: p(y=0) = Phi((psi_0 - psi_1) / sqrt 2)
    psi = torch.tensor([[0.3, -0.4], [2.0, 1.0]], dtype=torch.float64)
    p0 = torch.special.ndtr((psi[:, 0] - psi[:, 1]) / math.sqrt(2.0))
    assert torch.allclose(ev.predict_proba(psi, "normal")[:, 0], p0, atol=1e-12)


@pytest.mark.parametrize("noise", ["gumbel", "normal"])
def test_draws_average_probabilities(noise):
    S, R, K = 4, 7, 5
    table = 2.0 * torch.randn(S, R, K, dtype=torch.float64)
    y = torch.randint(0, K, (R,))
    per_draw = torch.stack([ev.predict_proba(table[s], noise) for s in range(S)])  # (S, R, K)
    mean = per_draw.mean(0)
    assert torch.allclose(ev.predict_proba(_draws(table), noise, num_rows=R), mean, atol=1e-12)
    expected = mean[torch.arange(R), y].log()
    got = ev.log_likelihood(_draws(table), y, noise, reduce="none", chunk_size=3)
    assert torch.allclose(got, expected, atol=1e-12)


def test_draws_rank_by_average_probability_not_average_utility():
    # draw 1 puts all mass on class 0; draw 2 prefers class 1. Mean utility ranks class 1
    # first, the predictive (mean probability 0.5 vs about 0.37) ranks class 0 first.
    table = torch.tensor([[[10.0, 0.0, 0.0]], [[-10.0, 1.0, 0.0]]], dtype=torch.float64)
    assert ev.accuracy(_draws(table), torch.tensor([0])) == 1.0
    classes, probs = ev.top_k(_draws(table), k=2, num_rows=1)
    assert classes.tolist() == [[0, 1]] and probs[0, 0].item() == pytest.approx(0.5, abs=1e-4)


@pytest.mark.parametrize("noise", ["gumbel", "normal"])
def test_point_accuracy_matches_argmax_of_probabilities(noise):
    psi, y = _problem(n=30, k=4)
    probs = ev.predict_proba(psi, noise)
    assert ev.accuracy(psi, y, noise) == pytest.approx((probs.argmax(-1) == y).double().mean().item())
    top3 = probs.topk(3, -1).indices
    assert ev.top_k_accuracy(psi, y, 3, noise) == pytest.approx((top3 == y[:, None]).any(-1).double().mean().item())
    assert ev.top_k_accuracy(psi, y, 4, noise) == 1.0
    classes, p = ev.top_k(psi, 3, noise)
    assert torch.equal(classes, top3) and torch.allclose(p, probs.gather(-1, top3), atol=1e-12)


def test_evaluate_is_the_separate_functions_in_one_pass():
    psi, y = _problem(n=40, k=8, scale=6.0)
    out = ev.evaluate(psi, y, ("log_lik", "log_lik_floored", "accuracy", "top1", "top5"), floor=-3.0)
    assert out["log_lik"] == pytest.approx(ev.log_likelihood(psi, y), abs=1e-14)
    assert out["log_lik_floored"] == pytest.approx(ev.log_likelihood(psi, y, floor=-3.0), abs=1e-14)
    assert out["log_lik_floored"] >= out["log_lik"]
    assert out["accuracy"] == out["top1"] == ev.accuracy(psi, y)
    assert out["top5"] == ev.top_k_accuracy(psi, y, 5)
    calls = []
    ev.evaluate(lambda ids: calls.append(len(ids)) or psi[ids], y, chunk_size=16)
    assert calls == [16, 16, 8]  # each row's utilities computed once for all the metrics


# ---------------------------------------------------------------- invariances
@pytest.mark.parametrize("noise", ["gumbel", "logistic"])
def test_chunk_size_invariance(noise):
    psi, y = _problem(n=19, k=5)
    rows = torch.randint(0, 19, (31,))
    y_rows = torch.randint(0, 5, (31,))
    ref = ev.evaluate(psi, y, ("log_lik", "top2"), noise, reduce="none", chunk_size=19)
    ref_rows = ev.evaluate(psi, y_rows, ("log_lik", "top2"), noise, reduce="none", rows=rows, chunk_size=19)
    ref_proba = ev.predict_log_proba(psi, noise)
    for c in CHUNKS:
        out = ev.evaluate(psi, y, ("log_lik", "top2"), noise, reduce="none", chunk_size=c)
        out_rows = ev.evaluate(psi, y_rows, ("log_lik", "top2"), noise, reduce="none", rows=rows, chunk_size=c)
        for name in ref:
            assert torch.allclose(out[name], ref[name], atol=1e-12), (c, name)
            assert torch.allclose(out_rows[name], ref_rows[name], atol=1e-12), (c, name)
        assert torch.allclose(ev.predict_log_proba(psi, noise, chunk_size=c), ref_proba, atol=1e-12)


@pytest.mark.parametrize("noise", ["gumbel", "normal"])
@pytest.mark.parametrize("draws", [False, True])
def test_rows_equals_the_expanded_computation(noise, draws):
    R, N, K = 6, 40, 5
    table = torch.randn(3 if draws else 1, R, K, dtype=torch.float64)
    rows = torch.randint(0, R, (N,))
    y = torch.randint(0, K, (N,))
    shared = _draws(table) if draws else table[0]
    expanded = _draws(table[:, rows]) if draws else table[0, rows]
    a = ev.evaluate(shared, y, ("log_lik", "accuracy", "top3"), noise, rows=rows, reduce="none", chunk_size=4)
    b = ev.evaluate(expanded, y, ("log_lik", "accuracy", "top3"), noise, reduce="none")
    for name in a:
        assert torch.allclose(a[name], b[name], atol=1e-12), name
    assert torch.allclose(ev.predict_log_proba(shared, noise, rows=rows),
                          ev.predict_log_proba(expanded, noise, num_rows=N), atol=1e-12)


def test_rows_computes_each_distinct_row_once():
    table = torch.randn(100, 7, dtype=torch.float64)
    rows = torch.tensor([5, 9, 5, 5, 9, 42])
    seen = []
    ev.log_likelihood(lambda ids: seen.extend(ids.tolist()) or table[ids], torch.zeros(6, dtype=torch.long),
                      rows=rows)
    assert sorted(seen) == [5, 9, 42]


def test_float32_input_gives_float64_results():
    psi64 = 30.0 * torch.randn(50, 1000, dtype=torch.float64)
    psi32 = psi64.float()
    y = torch.randint(0, 1000, (50,))
    exact = psi32.double().log_softmax(-1)[torch.arange(50), y]
    got = ev.log_likelihood(psi32, y, reduce="none")
    assert got.dtype == torch.float64
    assert torch.allclose(got, exact, atol=1e-12, rtol=0)
    x, W, b = torch.randn(50, 8), torch.randn(1000, 8), torch.randn(1000)
    lin = ev.log_likelihood(ar.LinearUtility(x, W, b), y, reduce="none")
    dense = (x.double() @ W.double().T + b.double()).log_softmax(-1)[torch.arange(50), y]
    assert torch.allclose(lin, dense, atol=1e-12, rtol=0)


def test_linear_source_matches_dense_and_draws():
    x, W, b = torch.randn(12, 3), torch.randn(4, 6, 3), torch.randn(4, 6)
    y = torch.randint(0, 6, (12,))
    psi = torch.einsum("nd,skd->snk", x.double(), W.double()) + b.double()[:, None]
    assert torch.allclose(ev.predict_log_proba(ev.linear_source(x, W, b)),
                          ev.predict_log_proba(_draws(psi), num_rows=12), atol=1e-12)
    assert ev.log_likelihood(ev.linear_source(x, W[0], b[0]), y) == pytest.approx(ev.log_likelihood(psi[0], y))


class _Rows:
    """Rows fetched on demand as torch-sparse batches (as the estimator's scipy rows are)."""

    def __init__(self, x):
        self.x, self.shape = x, x.shape

    def __getitem__(self, ids):
        return self.x[ids].to_sparse()


@pytest.mark.parametrize("sparse_rows", [False, True])
def test_linear_source_low_rank_sparse_rows_and_pattern_weights(sparse_rows):
    """Issue 28: the estimator's utilities (low rank W = V E^T, scipy rows fetched chunk by
    chunk, W on a pattern as a torch-sparse matrix) go through linear_source, in float64."""
    x, V, E, b = torch.randn(9, 5), torch.randn(3, 6, 2), torch.randn(3, 5, 2), torch.randn(3, 6)
    x[x.abs() < 0.7] = 0.0
    rows, ids = (_Rows(x) if sparse_rows else x), torch.tensor([4, 0, 7])
    dense = torch.einsum("nd,sdr,skr->snk", x.double(), E.double(), V.double()) + b.double()[:, None]
    assert torch.allclose(ev.linear_source(rows, V, b, embedding=E)(ids), dense[:, ids], atol=1e-12)
    assert torch.allclose(ev.linear_source(rows, V[0], b[0], embedding=E[0])(ids), dense[0, ids], atol=1e-12)
    W = x.new_zeros(6, 5)
    W[[0, 2, 5], [1, 1, 4]] = torch.tensor([1.5, -2.0, 0.5])
    plain = x.double() @ W.double().T + b[0].double()
    assert torch.allclose(ev.linear_source(rows, W.to_sparse(), b[0])(ids), plain[ids], atol=1e-12)
    with pytest.raises(ValueError, match="embedding"):
        ev.linear_source(rows, V, b, embedding=E[0])


@pytest.mark.parametrize("device", DEVICES)
def test_device(device):
    psi, y = _problem()
    out = ev.log_likelihood(psi.to(device), y.to(device), reduce="none", rows=None)
    assert out.device.type == device
    assert torch.allclose(out.cpu(), ev.log_likelihood(psi, y, reduce="none"))


# ---------------------------------------------------------------- bad input (issue 12 item 2)
E3 = torch.eye(3)
Y3 = torch.tensor([0, 1, 2])
BAD = [
    ("count", lambda: ev.accuracy(E3, torch.tensor([0, 1, 2, 0, 0, 0])), r"labels has 6 .* 3 rows"),
    ("too few", lambda: ev.log_likelihood(E3, torch.tensor([0, 1])), r"labels has 2"),
    ("label range", lambda: ev.accuracy(E3, torch.tensor([0, 7, 1])), r"labels .*\[0, K=3\).* 7"),
    ("negative label", lambda: ev.log_likelihood(E3, torch.tensor([0, -1, 1])), r"labels .* -1"),
    ("float labels", lambda: ev.top_k_accuracy(E3, Y3.float(), 2), r"labels .*dtype=torch.float32"),
    ("bool labels", lambda: ev.accuracy(E3, Y3 > 0), r"labels .*torch.bool"),
    ("2-D labels", lambda: ev.accuracy(E3, Y3[:, None]), r"labels must be 1-D"),
    ("empty", lambda: ev.accuracy(torch.zeros(0, 3), torch.zeros(0, dtype=torch.long)), r"utility has 0 rows"),
    ("empty labels", lambda: ev.accuracy(lambda ids: E3[ids], torch.zeros(0, dtype=torch.long)), r"labels is empty"),
    ("empty rows", lambda: ev.predict_proba(torch.zeros(0, 3)), r"0 rows"),
    ("k=0", lambda: ev.top_k_accuracy(E3, Y3, 0), r"k must .* k=0"),
    ("k>K", lambda: ev.top_k_accuracy(E3, Y3, 4), r"k must .*K=3.* k=4"),
    ("k float", lambda: ev.top_k(E3, 1.5), r"k must .* k=1.5"),
    ("k>K callable", lambda: ev.top_k_accuracy(lambda ids: E3[ids], Y3, 4), r"k=4"),
    ("nan", lambda: ev.log_likelihood(torch.tensor([[0.0, math.nan]]), torch.tensor([0])), r"utility .* nan"),
    ("inf", lambda: ev.accuracy(torch.tensor([[0.0, math.inf]]), torch.tensor([0])), r"utility .* inf"),
    ("nan draw", lambda: ev.log_likelihood(lambda ids: torch.full((2, len(ids), 3), math.nan), Y3), r"utility"),
    ("int utility", lambda: ev.accuracy(torch.eye(3, dtype=torch.long), Y3), r"utility .*floating"),
    ("3-D tensor", lambda: ev.accuracy(torch.zeros(2, 3, 3), Y3), r"utility .*batch_shape"),
    ("bad callable", lambda: ev.accuracy(lambda ids: torch.zeros(5), Y3), r"utility source must return"),
    ("label >= K callable", lambda: ev.log_likelihood(lambda ids: E3[ids], torch.tensor([0, 1, 3])), r"labels .*3"),
    ("rows range", lambda: ev.log_likelihood(E3, Y3, rows=torch.tensor([0, 3, 1])), r"rows .* 3"),
    ("rows count", lambda: ev.log_likelihood(E3, Y3, rows=torch.tensor([0, 1])), r"labels has 3 .*rows has 2"),
    ("rows float", lambda: ev.log_likelihood(E3, Y3, rows=torch.tensor([0.0, 1.0, 2.0])), r"rows .*float"),
    ("num_rows", lambda: ev.predict_proba(lambda ids: E3[ids]), r"num_rows"),
    ("reduce", lambda: ev.log_likelihood(E3, Y3, reduce="avg"), r"reduce .*'avg'"),
    ("chunk", lambda: ev.log_likelihood(E3, Y3, chunk_size=0), r"chunk_size=0"),
    ("metric", lambda: ev.evaluate(E3, Y3, ("log_lik", "auc")), r"metrics.*'auc'"),
    ("metric str", lambda: ev.evaluate(E3, Y3, "accuracy"), r"metrics"),
    ("noise", lambda: ev.log_likelihood(E3, Y3, "cauchy"), r"noise"),
    ("source", lambda: ev.accuracy("psi", Y3), r"utility must be"),
]


@pytest.mark.parametrize("call, match", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_is_a_named_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("call", [
    lambda: ev.accuracy(torch.eye(3), torch.tensor([0, 1, 2, 0, 0, 0])),
    lambda: ev.top_k_accuracy(torch.eye(3), torch.tensor([0, 1, 2]), k=0),
    lambda: ev.accuracy(torch.zeros(0, 3), torch.zeros(0, dtype=torch.long)),
    lambda: ev.log_likelihood(torch.eye(3), torch.tensor([0, 1, 2, 2])),
    lambda: metrics.bound(torch.eye(3), torch.tensor([0, 1, 5]), "ove"),
    lambda: metrics.bound(torch.eye(3), torch.tensor([0, 1, 2]), "ar", "normal", loc=torch.zeros(3),
                          scale=torch.ones(3), num_samples=0),
])
def test_issue_12_regressions(call):
    with pytest.raises(ValueError):
        call()
