"""The end of a run (issue 38): a gloo group started by ``init_process_group`` is destroyed by
an exit hook when the script does not destroy it (a 2-rank run aborted at exit in 1 launch of
11 without it: ``terminate called without an active exception``)."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch.distributed as dist

from pyro_ar.distributed import free_port

pytestmark = [pytest.mark.skipif(not (dist.is_available() and dist.is_gloo_available()),
                                 reason="torch.distributed with gloo is not available"),
              pytest.mark.slow]  # two processes started from scratch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

WORKER = textwrap.dedent("""
    import os, torch, torch.distributed as dist
    destroy = dist.destroy_process_group
    def traced(*args, **kwargs):  # say who destroys the group (the exit hook runs after this script)
        print("destroyed by", "the script" if os.environ.get("DONE") else "the exit hook", flush=True)
        return destroy(*args, **kwargs)
    dist.destroy_process_group = traced
    from pyro_ar.distributed import init_process_group, shutdown_process_group
    rank, world = init_process_group(timeout=120)
    t = torch.ones(3) * (rank + 1)
    dist.all_reduce(t)
    print("sum", t.tolist(), flush=True)
    if os.environ.get("SELF"):
        os.environ["DONE"] = "1"
        shutdown_process_group()
        shutdown_process_group()   # twice: nothing left to do
""")


def _launch(tmp_path, **env):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    port = free_port()
    procs = [subprocess.Popen([sys.executable, str(script)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": REPO, "RANK": str(r), "WORLD_SIZE": "2",
                                              "LOCAL_RANK": str(r), "MASTER_ADDR": "127.0.0.1",
                                              "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1", **env})
             for r in range(2)]
    outputs = [p.communicate(timeout=300) for p in procs]
    return [(p.returncode, out, err) for p, (out, err) in zip(procs, outputs)]


@pytest.mark.parametrize("env,who", [({}, "the exit hook"), ({"SELF": "1"}, "the script")])
def test_the_group_is_destroyed_once_at_the_end(tmp_path, env, who):
    for rc, out, err in _launch(tmp_path, **env):
        assert rc == 0 and out.split("\n")[:-1] == ["sum [3.0, 3.0, 3.0]", f"destroyed by {who}"], (out, err[-2000:])
        assert "terminate called" not in err
