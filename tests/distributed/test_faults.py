"""Distributed runs under faults (issue 25, items 1, 4 and 16), 2 gloo processes on localhost.

* item 1: sharded evaluation with K = 5,003 over 2 ranks (shards of 2,501 and 2,502
  classes) and 2,000 rows, so that the default chunk differs between the ranks: the ranks
  used to run different numbers of collectives and abort; it must equal the one-process
  log-softmax (float64 accumulation: 1e-9 relative covers float32 utilities summed in
  different orders);
* item 4: a rank that lost its newest checkpoint (killed between the others' save and its
  own), a rank with no checkpoint at all, and a rank SIGKILLed mid-run: the re-run resumes
  every rank from the newest common step and ends bit for bit where the uninterrupted run
  ends, or every rank fails naming the ranks' steps;
* item 16: a frozen rank (no heartbeat, never reaching the collective) is named by the
  others after the process group's timeout (2 s here; 5 minutes by default).
"""

import os
import tempfile

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from pyro_ar.distributed import free_port

from . import _fault_workers as F

pytestmark = [pytest.mark.skipif(not (dist.is_available() and dist.is_gloo_available()),
                                 reason="torch.distributed with gloo is not available"),
              pytest.mark.slow]  # every test spawns ranks (and waits out a real timeout)


def _errors(tmp, world):
    return "\n".join(open(f"{tmp}/rank{r}.err").read() for r in range(world)
                     if os.path.exists(f"{tmp}/rank{r}.err"))


def _run(fn, args, world=2, tmp=None, expect_exit=None, timeout=120):
    """Start ``world`` ranks of ``fn(rank, world, port, tmp, *args)`` and wait for each (no
    early termination of the others when one dies); returns (tmp, exit codes)."""
    tmp = tmp or tempfile.mkdtemp()
    ctx = mp.start_processes(fn, args=(world, free_port(), tmp, *args), nprocs=world, join=False,
                             start_method="spawn")
    for p in ctx.processes:
        p.join(timeout)
    codes = [p.exitcode for p in ctx.processes]
    for p in ctx.processes:
        if p.is_alive():
            p.kill()
    if expect_exit is None and any(codes):
        raise AssertionError(f"exit codes {codes}:\n{_errors(tmp, world)}")
    return tmp, codes


def _load(tmp, world=2, suffix=""):
    return [torch.load(f"{tmp}/rank{r}{suffix}.pt", weights_only=False) for r in range(world)]


@pytest.fixture(scope="module")
def faults():
    tmp, _ = _run(F.worker, (tuple(F.SCENARIOS),))
    return _load(tmp)


def test_sharded_evaluation_with_uneven_shards_and_several_chunks(faults):
    x, W, b, y = F.uneven_problem()
    exact = torch.log_softmax((x @ W.T + b).double(), -1)
    ref_ll = exact.gather(-1, y.unsqueeze(-1)).squeeze(-1)
    ref_acc = (exact.gather(-1, y.unsqueeze(-1)).squeeze(-1) >= exact.amax(-1)).double()
    for res in faults:
        out = res["cs_eval_uneven"]
        assert out["log_lik"].shape == (F.UNEVEN_N,)
        assert torch.allclose(out["log_lik"], ref_ll, rtol=1e-9, atol=1e-9)
        assert torch.equal(out["accuracy"], ref_acc)


@pytest.mark.parametrize("scenario", ["dp_lost_newest", "cs_lost_newest"])
def test_ranks_resume_from_the_newest_step_they_all_have(faults, scenario):
    assert [res[scenario]["steps_before"] for res in faults] == [[12, 8], [8]]
    for res in faults:
        out = res[scenario]
        for name in ("weight", "bias", "eta"):
            assert torch.equal(out["resumed"][name], out["full"][name]), name


def test_ranks_without_a_common_step_all_fail_naming_them(faults):
    for res in faults:
        message = res["no_common_step"]
        assert message is not None and "no step in common" in message
        assert "rank 0 has steps [8, 4]" in message and "rank 1 has none" in message


def test_a_killed_rank_is_named_and_the_rerun_resumes_exactly():
    tmp, codes = _run(F.kill_worker, ("kill",), expect_exit=True)
    assert codes[1] == -9, (codes, _errors(tmp, 2))         # rank 1: SIGKILL after step 10
    assert codes[0] == 0, _errors(tmp, 2)
    full = [r["full"] for r in _load(tmp, suffix=".full")]
    error = torch.load(f"{tmp}/rank0.pt", weights_only=False)["error"]
    assert "rank 1" in error and "did not reach it" in error, error
    tmp, _ = _run(F.kill_worker, ("resume",), tmp=tmp)
    for ref, res in zip(full, _load(tmp)):
        for name in ("weight", "bias", "eta"):
            assert torch.equal(res["resumed"][name], ref[name]), name


def test_a_frozen_rank_is_named_after_the_timeout():
    tmp, _ = _run(F.frozen_worker, ())
    out = _load(tmp)[0]
    assert out["error"] is not None and out["seconds"] < 15
    assert "rank 1 (no heartbeat" in out["error"] and "frozen or dead" in out["error"], out["error"]
