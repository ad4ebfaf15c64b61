"""The exact-softmax bigram language model as a user writes it in plain PyTorch, and a paired
step-time comparison with the library's exact path.

The plain loop (:class:`PlainExactBigram`) is the reference every speed claim of the
language-model tutorial and benchmarks is measured against:

    logits = F.linear(F.embedding(prev[idx], E), W, b)        # B x K
    loss = F.cross_entropy(logits, next[idx])                 # fused log-softmax + NLL
    opt.zero_grad(); loss.backward(); opt.step()              # torch.optim.Adam (dense)

The library's exact path (:class:`LibraryExactBigram`) is the same model,
``BigramLanguageModel(K, D, likelihood="exact")`` trained by stock ``pyro.infer.SVI`` with
``Trace_ELBO`` and ``pyro.optim.Adam`` (Pyro's validation on, its default).

``main`` times the two steps in one process, one torch thread, CPU time
(``time.process_time``), in interleaved blocks of ``--block`` steps (so that load changes
hit both alike), and prints the per-step times, the ratio of the totals and the median of
the per-block ratios (target of issue 16: library / plain <= 1.05).

    python -m benchmarks.plain_loop [--quick] [--rounds 20] [--block 5] [--no-validation] [--out DIR]

Writes plain_loop[_quick].json to ``--out``.
"""

import os
import statistics

from benchmarks import harness
from pyro_ar.models import Init

__all__ = ["PlainExactBigram", "LibraryExactBigram", "AdaptiveSoftmaxBigram", "adaptive_output_layer",
           "optimizer_step", "frequency_cutoffs"]


class PlainExactBigram:
    """Exact softmax bigram model, the usual user loop (``F.cross_entropy``, dense
    ``torch.optim.Adam``); parameters E, W ~ N(0, 0.1^2), b = ``init_bias``."""

    def __init__(self, K, D, x, y, B, lr, init_bias, device="cpu"):
        import torch

        self.x, self.y, self.B = x, y, B
        self.E = (0.1 * torch.randn(K, D, device=device)).requires_grad_()
        self.W = (0.1 * torch.randn(K, D, device=device)).requires_grad_()
        self.b = init_bias.float().to(device).clone().requires_grad_()
        self.opt = torch.optim.Adam([self.E, self.W, self.b], lr=lr)

    def step(self):
        import torch
        import torch.nn.functional as F

        idx = torch.randint(0, self.x.shape[0], (self.B,), device=self.x.device)
        logits = F.linear(F.embedding(self.x[idx], self.E), self.W, self.b)
        loss = F.cross_entropy(logits, self.y[idx])
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()

    def evaluate(self, prev, nxt, reduce="mean"):
        """Exact mean test log-likelihood (the library's evaluation, normaliser once per
        distinct previous word; ``reduce="none"``: per pair)."""
        from pyro_ar.evaluation import linear_source, log_likelihood

        return log_likelihood(linear_source(self.E.detach(), self.W.detach(), self.b.detach()), nxt,
                              rows=prev, chunk_size=256, reduce=reduce)

    log_likelihood_pairs = evaluate


def frequency_cutoffs(counts, coverage=(0.8, 0.95), round_to=100):
    r"""Adaptive-softmax cutoffs chosen by word frequency: the number of most frequent words
    that cover each fraction of ``coverage`` of the training tokens, rounded to ``round_to``.

    The head then holds the words that make up 80 % of the text and the first tail cluster
    those up to 95 % (Grave et al. 2017, *Efficient softmax approximation for GPUs*: a small
    head of frequent words, rarer words in smaller-dimensional tail clusters). Brown
    (K = 25,275): ``[1600, 9500]``; the King James Bible (K = 8,258): ``[300, 1900]``.

    :raises ValueError: if ``coverage`` is not increasing in (0, 1) or the cutoffs collide.
    """
    import torch

    if not all(0.0 < c < 1.0 for c in coverage) or list(coverage) != sorted(set(coverage)):
        raise ValueError(f"coverage must be increasing fractions in (0, 1), got coverage={coverage!r}")
    c = counts.double().sort(descending=True).values
    share = c.cumsum(0) / c.sum()
    K = int(c.numel())
    cuts = [max(round_to, round_to * round(int((share < q).sum() + 1) / round_to)) for q in coverage]
    if any(b <= a for a, b in zip(cuts, cuts[1:])) or cuts[-1] >= K - 1:
        raise ValueError(f"coverage={coverage!r} gives cutoffs {cuts} for K = {K}: they must increase "
                         f"and stay below K - 1")
    return cuts


def optimizer_step(opts, loss):
    """One step of every optimizer of ``opts`` on ``loss`` (e.g. ``SparseAdam`` for the context
    rows and ``Adam`` for the rest); the loss as a float."""
    for opt in opts:
        opt.zero_grad()
    loss.backward()
    for opt in opts:
        opt.step()
    return loss.item()


def adaptive_output_layer(D, K, counts, init_bias, cutoffs=None, div_value=4.0, device="cpu"):
    """``(asm, rank, cutoffs)``: ``torch.nn.AdaptiveLogSoftmaxWithLoss(D, K, cutoffs, div_value,
    head_bias=True)`` initialised as :class:`AdaptiveSoftmaxBigram` says (head weights
    ``N(0, 0.1^2)``, head biases at the log unigram frequencies ``init_bias`` of the head words
    and the log total frequency of each tail cluster), and ``rank``, the map class id ->
    frequency rank (the module's class order); cutoffs default to :func:`frequency_cutoffs`."""
    import torch

    cutoffs = list(cutoffs) if cutoffs else frequency_cutoffs(counts)
    order = counts.double().sort(descending=True, stable=True).indices.to(device)   # rank -> class id
    rank = torch.empty_like(order)
    rank[order] = torch.arange(K, device=device)
    asm = torch.nn.AdaptiveLogSoftmaxWithLoss(D, K, cutoffs, div_value=div_value, head_bias=True).to(device)
    with torch.no_grad():
        p = init_bias.double().to(device).exp()[order]
        p = p / p.sum()
        edges = [0] + cutoffs + [K]
        tails = [p[a:b].sum() for a, b in zip(edges[1:], edges[2:])]
        asm.head.weight.normal_(0.0, 0.1)
        asm.head.bias.copy_(torch.cat([p[:cutoffs[0]], torch.stack(tails)]).log().float())
    return asm, rank, cutoffs


class AdaptiveSoftmaxBigram:
    r"""The bigram model with PyTorch's adaptive softmax as the output layer, as a user writes it.

    The context representation is the exact model's: a learned embedding
    :math:`e_u\in\mathbb{R}^D` of the previous word (``N(0, 0.1^2)``, dense gradient). The
    output layer is ``torch.nn.AdaptiveLogSoftmaxWithLoss(D, K, cutoffs, div_value, head_bias=True)``
    (Grave et al. 2017): a head softmax over the ``cutoffs[0]`` most frequent words and one
    token per tail cluster, :math:`\log p(k\mid u) = \log p_\text{head}(c(k)\mid e_u)
    + \log p_{c(k)}(k\mid P_{c(k)} e_u)` for a word in tail cluster :math:`c(k)` (projection
    :math:`P_c` to :math:`D/\text{div}^{c}` dimensions, no bias), so every word has a
    probability and they sum to one exactly (:meth:`log_prob_all`). The module needs the
    classes in order of decreasing frequency; they are ranked by ``counts`` here and mapped
    back, so any id order works. Trained on ``loss`` (the mean negative log-likelihood of the
    minibatch) by ``torch.optim.Adam``; with ``sparse=True`` (the default: the cheaper step,
    measured 2x on Brown, where dense Adam over the K x D context table is half the step) the
    context embedding gets a row-sparse gradient and ``torch.optim.SparseAdam``, the output
    layer ``Adam``, as a user tuning for speed writes it.

    Initialisation as the other methods': head weights ``N(0, 0.1^2)``, head biases at the
    smoothed log unigram frequencies ``init_bias`` of the head words and, for each tail
    cluster's token, the log of the cluster's total frequency (so step 0 predicts the unigram
    distribution over head words and clusters); the tails keep PyTorch's initialisation (they
    have no biases).
    """

    def __init__(self, K, D, x, y, B, lr, init_bias, counts, cutoffs=None, div_value=4.0,
                 sparse=True, device="cpu"):
        import torch

        self.x, self.y, self.B = x, y, B
        self.E = (0.1 * torch.randn(K, D, device=device)).requires_grad_()
        self.asm, self.rank, self.cutoffs = adaptive_output_layer(D, K, counts, init_bias, cutoffs, div_value, device)
        self.sparse = sparse
        if sparse:  # only the minibatch's context rows: SparseAdam for E, Adam for the output layer
            self.opts = [torch.optim.SparseAdam([self.E], lr=lr), torch.optim.Adam(self.asm.parameters(), lr=lr)]
        else:
            self.opts = [torch.optim.Adam([self.E] + list(self.asm.parameters()), lr=lr)]

    def step(self):
        import torch
        import torch.nn.functional as F

        idx = torch.randint(0, self.x.shape[0], (self.B,), device=self.x.device)
        h = F.embedding(self.x[idx], self.E, sparse=self.sparse)
        return optimizer_step(self.opts, self.asm(h, self.rank[self.y[idx]]).loss)

    def log_prob_all(self, prev):
        """``(len(prev), K)`` log-probabilities of every class (columns in class-id order)."""
        import torch

        with torch.no_grad():
            return self.asm.log_prob(self.E[prev]).index_select(1, self.rank)

    def evaluate(self, prev, nxt, reduce="mean"):
        """Exact mean test log-likelihood over all K classes (the library's evaluation, the
        distribution computed once per distinct previous word; ``reduce="none"``: per pair)."""
        from pyro_ar.evaluation import log_likelihood

        return log_likelihood(self.log_prob_all, nxt, rows=prev, chunk_size=256, reduce=reduce)

    log_likelihood_pairs = evaluate


class LibraryExactBigram(harness.SVIMethod):
    """``BigramLanguageModel(K, D, likelihood="exact")`` + ``SVI(Trace_ELBO, pyro.optim.Adam)``."""

    def __init__(self, K, D, x, y, B, lr, init_bias, device="cpu", prefix=""):
        import pyro
        from pyro.infer import Trace_ELBO

        from pyro_ar.infer import default_guide
        from pyro_ar.models import BigramLanguageModel

        model = BigramLanguageModel(K, D, likelihood="exact", subsample_size=B,
                                    init=Init(bias=init_bias.float().to(device)), prefix=prefix)
        super().__init__(model, default_guide(model), pyro.optim.Adam({"lr": lr}), Trace_ELBO(), x, y)

    def evaluate(self, prev, nxt):
        return self.model.log_likelihood(prev, nxt)


def main(argv=None):
    p = harness.parser(__doc__, quick_help="4 rounds (a smoke run)")
    p.add_argument("--rounds", type=int, default=None)
    p.add_argument("--block", type=int, default=5)
    p.add_argument("--D", type=int, default=64)
    p.add_argument("--B", type=int, default=512)
    p.add_argument("--no-validation", action="store_true", help="Pyro validation off")
    a = p.parse_args(argv)
    rounds = a.rounds or (4 if a.quick else 20)

    harness.start(a)
    import pyro

    from pyro_ar.datasets import load_brown
    from pyro_ar.models import unigram_log_probs

    pyro.enable_validation(not a.no_validation)
    d = load_brown()
    K, counts = d.num_classes, d.info["class_counts"]
    bias = unigram_log_probs(counts).float()
    pyro.clear_param_store()
    lib = LibraryExactBigram(K, a.D, d.x_train, d.y_train, a.B, 3e-3, bias)
    plain = PlainExactBigram(K, a.D, d.x_train, d.y_train, a.B, 3e-3, bias)
    t = harness.paired_step_times({"library": lib.step, "plain": plain.step}, rounds, a.block)
    ratios = [x / y for x, y in zip(t["library"], t["plain"])]
    ms = {k: 1e3 * statistics.mean(v) for k, v in t.items()}
    res = dict(K=K, D=a.D, B=a.B, rounds=rounds, block=a.block, validation=not a.no_validation,
               ms_per_step=ms, ratio_of_totals=sum(t["library"]) / sum(t["plain"]),
               median_block_ratio=statistics.median(ratios), block_ratios=ratios,
               load_average=os.getloadavg())
    print(f"Brown K={K:,}, D={a.D}, B={a.B}, one thread, CPU time, {rounds} interleaved rounds of "
          f"{a.block} steps, Pyro validation {'on' if res['validation'] else 'off'}")
    print(f"  library exact (BigramLanguageModel + SVI + pyro.optim.Adam): {ms['library']:7.1f} ms/step")
    print(f"  plain loop (F.cross_entropy + torch.optim.Adam):            {ms['plain']:7.1f} ms/step")
    print(f"  library / plain: {res['ratio_of_totals']:.3f} (totals), {res['median_block_ratio']:.3f} "
          f"(median of the per-round ratios); target <= 1.05")
    harness.save(a, "plain_loop", res)
    return res


if __name__ == "__main__":
    main()
