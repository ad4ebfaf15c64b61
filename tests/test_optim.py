"""Tests of pyro_ar.optim: lazy row-wise optimizers for sparse gradients."""

import pytest
import torch
import torch.nn.functional as F
from torch.optim.optimizer import register_optimizer_step_post_hook

from pyro_ar.optim import ADVIStepSize, LazyAdam, advi_step_size, lazy_adam
from pyro_ar.likelihoods import AR
from pyro_ar.negatives import SharedNegatives


def _quadratic_grads(p, target):
    return ((p - target) ** 2).sum()


@pytest.mark.parametrize("shape", [(), (7,), (5, 3)])
def test_lazy_adam_equals_adam_for_dense_gradients(shape):
    g = torch.Generator().manual_seed(0)
    target = torch.randn(shape, generator=g, dtype=torch.float64)
    p1 = torch.zeros(shape, dtype=torch.float64, requires_grad=True)
    p2 = torch.zeros(shape, dtype=torch.float64, requires_grad=True)
    o1, o2 = LazyAdam([p1], lr=0.1), torch.optim.Adam([p2], lr=0.1)
    for _ in range(25):
        for p, o in ((p1, o1), (p2, o2)):
            o.zero_grad()
            _quadratic_grads(p, target).backward()
            o.step()
    assert torch.allclose(p1, p2, atol=1e-12)


def test_lazy_adam_sparse_step_touches_only_used_rows_and_matches_adam_on_them():
    """Rows named by a sparse gradient follow Adam (per-row bias correction); others stay put."""
    g = torch.Generator().manual_seed(1)
    K, D = 50, 4
    W_lazy = torch.randn(K, D, generator=g, dtype=torch.float64).requires_grad_()
    W_ref = W_lazy.detach().clone()
    opt = LazyAdam([W_lazy], lr=0.05)
    rows = torch.tensor([3, 7, 7, 20])  # duplicate row: its gradients are summed
    for step in range(3):
        opt.zero_grad()
        F.embedding(rows, W_lazy, sparse=True).pow(2).sum().backward()
        assert W_lazy.grad.is_sparse
        opt.step()
    # reference: plain Adam on the same loss restricted to the used rows
    used = rows.unique()
    sub = W_ref[used].clone().requires_grad_()
    ref = torch.optim.Adam([sub], lr=0.05)
    counts = torch.bincount(rows, minlength=K)[used].to(torch.float64)
    for step in range(3):
        ref.zero_grad()
        (counts[:, None] * sub.pow(2)).sum().backward()
        ref.step()
    assert torch.allclose(W_lazy.detach()[used], sub.detach(), atol=1e-12)
    untouched = torch.ones(K, dtype=torch.bool)
    untouched[used] = False
    assert torch.equal(W_lazy.detach()[untouched], W_ref[untouched])


def test_advi_step_size_follows_the_authors_schedule():
    """theta -= lr * 0.9^(s // T) * t^-1/2 * g / (1 + sqrt(G)), G = g^2 at t = 1, then
    G <- 0.1 g^2 + 0.9 G; checked against the formula written out step by step."""
    p = torch.tensor([1.0, -2.0], dtype=torch.float64, requires_grad=True)
    opt = ADVIStepSize([p], lr=0.02, decay_every=2)
    theta, G = p.detach().clone(), None
    for t in range(1, 6):
        opt.zero_grad()
        (p ** 2).sum().backward()
        grad = 2 * theta
        G = grad ** 2 if G is None else 0.1 * grad ** 2 + 0.9 * G
        lr = 0.02 * 0.9 ** (t // 2)
        theta = theta - lr * t ** -0.5 * grad / (1 + G.sqrt())
        opt.step()
        assert torch.allclose(p.detach(), theta, atol=1e-14)


def test_optimizer_argument_errors():
    p = torch.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="lr"):
        LazyAdam([p], lr=0.0)
    with pytest.raises(ValueError, match="betas"):
        LazyAdam([p], betas=(1.0, 0.9))
    with pytest.raises(ValueError, match="alpha"):
        ADVIStepSize([p], alpha=0.0)


@pytest.mark.parametrize("cls", [LazyAdam, ADVIStepSize])
@pytest.mark.parametrize("sparse", [True, False])
def test_state_dict_round_trip_continues_bit_identically(cls, sparse):
    """Save the state after k steps, load it into a fresh optimizer on a copy of the
    parameters, continue: identical (torch.equal) to the uninterrupted run. Regression:
    load_state_dict cast the int64 row_step counts to float and the next step raised."""
    g = torch.Generator().manual_seed(3)
    rows = [torch.randint(0, 30, (6,), generator=g) for _ in range(10)]
    W0 = torch.randn(30, 4, generator=g, dtype=torch.float64)

    def run(W, opt, batches):
        for r in batches:
            opt.zero_grad()
            if sparse:
                F.embedding(r, W, sparse=True).pow(2).sum().backward()
            else:
                W[r].pow(2).sum().backward()
            opt.step()

    W_ref = W0.clone().requires_grad_()
    opt_ref = cls([W_ref], lr=0.05)
    run(W_ref, opt_ref, rows)

    W = W0.clone().requires_grad_()
    opt = cls([W], lr=0.05)
    run(W, opt, rows[:4])
    state = opt.state_dict()
    W_resumed = W.detach().clone().requires_grad_()
    opt_resumed = cls([W_resumed], lr=0.05)
    opt_resumed.load_state_dict(state)
    assert opt_resumed.state[W_resumed]["row_step"].dtype == torch.long
    run(W_resumed, opt_resumed, rows[4:])
    assert torch.equal(W_resumed.detach(), W_ref.detach())
    assert torch.equal(opt_resumed.state[W_resumed]["row_step"], opt_ref.state[W_ref]["row_step"])


# ---------------------------------------------------------------- the Pyro wrappers
def _svi_run(optim, steps=6, natural=True, seed=0):
    """A&R softmax SVI steps (natural eta: the guide's eta never has a gradient)."""
    import pyro
    from pyro.infer import SVI

    from pyro_ar.datasets import make_linear_teacher
    from pyro_ar.infer import ClosedFormELBO, GumbelLocalGuide
    from pyro_ar.models import LinearClassifier

    pyro.clear_param_store()
    pyro.set_rng_seed(seed)
    data = make_linear_teacher(300, 4, 40, seed=0)
    model = LinearClassifier(4, 40, likelihood=AR(negatives=SharedNegatives(5)), subsample_size=32,
                             sparse=True)
    guide = GumbelLocalGuide(model, create_plates=model.create_plates,
                             local_step="natural" if natural else "gradient")
    svi = SVI(model, guide, optim, ClosedFormELBO())
    losses = [svi.step(data.x, data.y) for _ in range(steps)]
    store = pyro.get_param_store()
    params = {n: store[n].detach().clone() for n in store.keys()}
    state = svi.optim.get_state()
    pyro.clear_param_store()
    return losses, params, state


@pytest.mark.parametrize("natural", [True, False])
@pytest.mark.parametrize("make,cls", [(lazy_adam, LazyAdam), (advi_step_size, ADVIStepSize)])
def test_pyro_wrapper_steps_exactly_like_pyro_optim(make, cls, natural):
    """lazy_adam / advi_step_size (skip gradient-free params, direct updates, released
    grads) give bit-identical trajectories to the stock PyroOptim of the same optimizer,
    create no optimizer for a parameter that never gets a gradient (the natural eta), and
    keep PyroOptim's per-parameter state format."""
    from pyro.optim import PyroOptim

    losses, params, state = _svi_run(make({"lr": 0.05}), natural=natural)
    ref_losses, ref_params, ref_state = _svi_run(PyroOptim(cls, {"lr": 0.05}), natural=natural)
    assert losses == ref_losses
    assert params.keys() == ref_params.keys()
    assert all(torch.equal(params[n], ref_params[n]) for n in params)
    eta = [n for n in ref_state if "log_eta" in n]
    assert eta and (eta[0] in state) == (not natural)
    for n in state:
        for key, value in state[n]["state"][0].items():
            ref = ref_state[n]["state"][0][key]
            assert torch.equal(value, ref) if torch.is_tensor(value) else value == ref


def test_pyro_wrapper_runs_step_hooks_and_releases_grads():
    """With an optimizer step hook registered, the hook still runs every step; the
    gradients consumed by a step are released (None), those of skipped params untouched."""
    calls = []
    handle = register_optimizer_step_post_hook(lambda opt, a, k: calls.append(1))
    try:
        _svi_run(lazy_adam({"lr": 0.05}), steps=3)
    finally:
        handle.remove()
    assert len(calls) == 3 * 2  # W and b, each step
    optim = lazy_adam({"lr": 0.1})
    import pyro

    pyro.clear_param_store()
    w = pyro.param("w", torch.zeros(3)).unconstrained()
    frozen = pyro.param("frozen", torch.zeros(2)).unconstrained()
    (w - 1).pow(2).sum().backward()
    optim([w, frozen])
    assert w.grad is None and frozen.grad is None and w.detach().abs().sum() > 0
    assert list(optim.optim_objs) == [w]
    pyro.clear_param_store()


# ------------------------------------------------------------------ entry-sparse gradients
@pytest.mark.parametrize("cls", [LazyAdam, ADVIStepSize])
def test_entry_sparse_step_touches_only_used_entries_and_equals_the_flat_row_update(cls):
    """A gradient sparse in classes and features steps exactly its entries (values and
    state), like the row update of the same parameter seen flat (each entry a row)."""
    from pyro_ar.utility import gather_entries

    torch.manual_seed(0)
    K, D = 6, 5
    W = torch.randn(K, D, dtype=torch.float64, requires_grad=True)
    flat = W.detach().clone().reshape(-1).requires_grad_()
    opt, ref = cls([W], lr=0.1), cls([flat], lr=0.1)
    for _ in range(4):
        rows, cols, g = torch.randint(K, (5,)), torch.randint(D, (5,)), torch.randn(5, dtype=torch.float64)
        (gather_entries(W, rows, cols) * g).sum().backward()
        (torch.gather(flat, 0, rows * D + cols, sparse_grad=True) * g).sum().backward()
        before = {n: t.clone() for n, t in opt.state[W].items() if torch.is_tensor(t)} if opt.state[W] else {}
        w_before = W.detach().clone()
        opt.step(), ref.step()
        W.grad = flat.grad = None
        used = torch.zeros(K, D, dtype=torch.bool)
        used[rows, cols] = True
        assert torch.equal(W.detach()[~used], w_before[~used])
        for name, old in before.items():  # untouched entries keep their state
            assert torch.equal(opt.state[W][name][~used], old[~used]), name
        assert torch.equal(W.detach().reshape(-1), flat.detach())
    assert opt.state[W]["entry_step"].dtype == torch.int32
    assert torch.equal(opt.state[W]["entry_step"].reshape(-1).long(), ref.state[flat]["row_step"])
    # then a row-sparse gradient of the same parameter: its rows' entries all step
    torch.nn.functional.embedding(torch.tensor([1, 3]), W, sparse=True).sum().backward()
    torch.gather(flat, 0, torch.cat([torch.arange(D) + D, torch.arange(D) + 3 * D]), sparse_grad=True).sum().backward()
    opt.step(), ref.step()
    assert torch.equal(W.detach().reshape(-1), flat.detach())


def test_entry_step_counts_survive_a_state_dict_round_trip():
    from pyro_ar.utility import gather_entries

    W = torch.zeros(4, 3, requires_grad=True)
    opt = LazyAdam([W], lr=0.1)
    gather_entries(W, torch.tensor([1]), torch.tensor([2])).sum().backward()
    opt.step()
    copy = LazyAdam([W], lr=0.1)
    copy.load_state_dict(opt.state_dict())
    assert copy.state[W]["entry_step"].dtype == torch.int32
    assert copy.state[W]["entry_step"].sum() == 1


# ------------------------------------------------- one pass over the parameters of a step
def _row_reference(K, shape, dtype):
    """Plain torch Adam on one tensor per row, stepped only when the row is touched (the
    reference of a lazy Adam: per-row moments and bias corrections)."""
    rows = [torch.zeros(shape, dtype=dtype, requires_grad=True) for _ in range(K)]
    return rows, [torch.optim.Adam([r], lr=0.05) for r in rows]


@pytest.mark.parametrize("through_pyro", [False, True])
def test_one_pass_over_parameters_equals_adam_on_the_touched_rows(through_pyro):
    """A weight matrix and its bias gathered at the same rows (their bias corrections shared
    within the pass), a third parameter on other rows, and a fourth on the same rows with
    fewer steps (its own corrections): every
    touched row follows torch's Adam on that row alone, untouched rows keep value and state.
    Through ``lazy_adam`` (one LazyAdam per parameter, updated in one pass) and through one
    ``LazyAdam`` over all three."""
    import pyro

    g = torch.Generator().manual_seed(3)
    K, D, dt = 12, 3, torch.float64
    init = {"W": torch.randn(K, D, generator=g, dtype=dt), "b": torch.randn(K, generator=g, dtype=dt),
            "c": torch.randn(K, generator=g, dtype=dt), "d": torch.randn(K, generator=g, dtype=dt)}
    ref = {n: _row_reference(K, v.shape[1:], dt) for n, v in init.items()}
    for n, (rows, _) in ref.items():
        with torch.no_grad():
            for k, r in enumerate(rows):
                r.copy_(init[n][k])
    if through_pyro:
        pyro.clear_param_store()
        params = {n: pyro.param(n, v.clone()).unconstrained() for n, v in init.items()}
        optim = lazy_adam({"lr": 0.05})
    else:
        params = {n: v.clone().requires_grad_() for n, v in init.items()}
        opt = LazyAdam(list(params.values()), lr=0.05)
    touched = torch.zeros(K, dtype=torch.bool)
    for step in range(6):
        wb_rows = torch.randint(0, K, (5,), generator=g)  # duplicates: summed gradients
        c_rows = torch.randint(0, K, (2 + step % 3,), generator=g)
        target = torch.randn(5, D, generator=g, dtype=dt)
        w = F.embedding(wb_rows, params["W"], sparse=True)
        b = torch.gather(params["b"], 0, wb_rows, sparse_grad=True)
        c = torch.gather(params["c"], 0, c_rows, sparse_grad=True)
        loss = (w - target).pow(2).sum() + (b - 1).pow(2).sum() * (1 + step) + c.pow(3).sum()
        if step >= 2:  # d: the rows of W and b, fewer steps (no shared bias corrections)
            loss = loss + torch.gather(params["d"], 0, wb_rows, sparse_grad=True).pow(2).sum()
        loss.backward()
        grads = {n: p.grad.coalesce() for n, p in params.items() if p.grad is not None}
        if through_pyro:
            optim(list(params.values()))
        else:
            opt.step()
            opt.zero_grad()
        for n, grad in grads.items():
            rows_ref, opts = ref[n]
            for k, v in zip(grad.indices()[0].tolist(), grad.values()):
                rows_ref[k].grad = v.clone()
                opts[k].step()
        touched[wb_rows] = True
    for n, p in params.items():
        expect = torch.stack([r.detach() for r in ref[n][0]])
        assert torch.allclose(p.detach(), expect, rtol=1e-12, atol=1e-12), n
    untouched = ~touched
    assert torch.equal(params["W"].detach()[untouched], init["W"][untouched])
    if through_pyro:
        pyro.clear_param_store()


def test_building_a_lazy_optimizer_does_not_import_torch_dynamo():
    """add_param_group skips torch's dynamo wrapper, whose first call imports torch._dynamo (over
    a CPU second in a fresh process's first fit); the param groups are torch's all the same."""
    import subprocess
    import sys

    code = ("import sys, torch\n"
            "from pyro_ar.optim import LazyAdam, ADVIStepSize\n"
            "W = torch.zeros(3, requires_grad=True)\n"
            "opt = LazyAdam([{'params': [W], 'lr': 0.5}], lr=0.1)\n"
            "ADVIStepSize([torch.zeros(2, requires_grad=True)])\n"
            "assert opt.param_groups[0]['lr'] == 0.5 and opt.param_groups[0]['betas'] == (0.9, 0.999)\n"
            "print('torch._dynamo' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
