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

    python benchmarks/plain_loop.py [--quick] [--rounds 20] [--block 5] [--no-validation]
"""

import argparse
import json
import os
import statistics
import sys
import tempfile

__all__ = ["PlainExactBigram", "LibraryExactBigram"]


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

    def evaluate(self, prev, nxt):
        """Exact mean test log-likelihood (the library's evaluation, normaliser once per
        distinct previous word)."""
        from pyro_ar.evaluation import linear_source, log_likelihood

        return log_likelihood(linear_source(self.E.detach(), self.W.detach(), self.b.detach()), nxt,
                              rows=prev, chunk_size=256)

    log_likelihood_pairs = evaluate


class LibraryExactBigram:
    """``BigramLanguageModel(K, D, likelihood="exact")`` + ``SVI(Trace_ELBO, pyro.optim.Adam)``."""

    def __init__(self, K, D, x, y, B, lr, init_bias, device="cpu", prefix=""):
        import pyro
        from pyro.infer import SVI, Trace_ELBO

        from pyro_ar.models import BigramLanguageModel

        self.model = BigramLanguageModel(K, D, likelihood="exact", subsample_size=B,
                                         init_bias=init_bias.float().to(device), prefix=prefix)
        self.svi = SVI(self.model, self.model.default_guide(), pyro.optim.Adam({"lr": lr}), Trace_ELBO())
        self.x, self.y = x, y
        self.model(x[:2], y[:2])  # create the parameters

    def step(self):
        return self.svi.step(self.x, self.y)

    def evaluate(self, prev, nxt):
        return self.model.log_likelihood(prev, nxt)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="4 rounds (a smoke run)")
    p.add_argument("--rounds", type=int, default=None)
    p.add_argument("--block", type=int, default=5)
    p.add_argument("--D", type=int, default=64)
    p.add_argument("--B", type=int, default=512)
    p.add_argument("--no-validation", action="store_true", help="Pyro validation off")
    p.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "pyro_ar_plain_loop.json"))
    a = p.parse_args(argv)
    rounds = a.rounds or (4 if a.quick else 20)

    import torch

    torch.set_num_threads(1)
    import pyro

    from pyro_ar.datasets import load_brown
    from pyro_ar.models import unigram_log_probs

    pyro.enable_validation(not a.no_validation)
    pyro.set_rng_seed(0)
    d = load_brown()
    K, counts = d.num_classes, d.info["class_counts"]
    bias = unigram_log_probs(counts).float()
    pyro.clear_param_store()
    lib = LibraryExactBigram(K, a.D, d.x_train, d.y_train, a.B, 3e-3, bias)
    plain = PlainExactBigram(K, a.D, d.x_train, d.y_train, a.B, 3e-3, bias)
    from paper_common import paired_step_times   # (the benchmarks' shared timing)

    t = paired_step_times({"library": lib.step, "plain": plain.step}, rounds, a.block)
    ratios = [x / y for x, y in zip(t["library"], t["plain"])]
    ms = {k: 1e3 * statistics.mean(v) for k, v in t.items()}
    res = dict(K=K, D=a.D, B=a.B, rounds=rounds, block=a.block, validation=not a.no_validation,
               ms_per_step=ms, ratio_of_totals=sum(t["library"]) / sum(t["plain"]),
               median_block_ratio=statistics.median(ratios), block_ratios=ratios,
               torch=torch.__version__, pyro=pyro.__version__, load_average=os.getloadavg(),
               command=" ".join(["python"] + sys.argv))
    print(f"Brown K={K:,}, D={a.D}, B={a.B}, one thread, CPU time, {rounds} interleaved rounds of "
          f"{a.block} steps, Pyro validation {'on' if res['validation'] else 'off'}")
    print(f"  library exact (BigramLanguageModel + SVI + pyro.optim.Adam): {ms['library']:7.1f} ms/step")
    print(f"  plain loop (F.cross_entropy + torch.optim.Adam):            {ms['plain']:7.1f} ms/step")
    print(f"  library / plain: {res['ratio_of_totals']:.3f} (totals), {res['median_block_ratio']:.3f} "
          f"(median of the per-round ratios); target <= 1.05")
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {a.out}")
    return res


if __name__ == "__main__":
    main()
