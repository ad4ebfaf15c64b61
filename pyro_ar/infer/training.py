"""A small SVI loop that records losses and evaluations against wall time."""

import statistics
import time
from typing import Callable, Dict, List, Optional

__all__ = ["train"]


def train(svi, *args, num_steps: int = 1000, eval_fn: Optional[Callable[[], Dict]] = None,
          eval_every: Optional[int] = None, time_budget: Optional[float] = None,
          progress: bool = False, log_every: Optional[int] = None,
          step_times: Optional[List[float]] = None, **kwargs) -> List[Dict]:
    """Run ``svi.step(*args, **kwargs)`` and return a history of records.

    Each record has ``step``, ``time`` (seconds of training so far, evaluation time
    excluded), ``loss`` (mean of the step losses since the previous record),
    ``step_time`` (median wall time of one step since the previous record, seconds) and,
    at evaluation points, whatever ``eval_fn()`` returns. Stops after ``num_steps`` or
    once ``time_budget`` seconds of training have elapsed. The first record (step 0) and
    the last are always evaluated.

    :param eval_every: steps between calls of ``eval_fn`` (default ``num_steps // 20``).
    :param log_every: steps between loss records (default ``eval_every``); a finer
        loss trace without the cost of evaluating.
    :param step_times: a list to which the wall time of every step is appended (for
        medians over the whole run).
    :param progress: show a tqdm progress bar with the running loss.

    Example:

    >>> from pyro.infer import SVI
    >>> from pyro_ar.datasets import make_linear_teacher
    >>> from pyro_ar.infer import train
    >>> from pyro_ar.models import LinearClassifier
    >>> from pyro_ar.optim import lazy_adam
    >>> data = make_linear_teacher(500, 4, 20, seed=0)
    >>> model = LinearClassifier(4, 20, num_negatives=5, subsample_size=50, sparse=True)
    >>> svi = SVI(model, model.default_guide(), lazy_adam({"lr": 0.05}), model.default_elbo())
    >>> history = train(svi, data.x, data.y, num_steps=30, eval_every=10)
    >>> [h["step"] for h in history]
    [0, 10, 20, 30]
    """
    history, elapsed, losses, times = [], 0.0, [], []
    eval_every = eval_every or max(1, num_steps // 20)
    log_every = log_every or eval_every
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=num_steps)

    def record(step, evaluate):
        rec = {"step": step, "time": elapsed,
               "loss": sum(losses) / len(losses) if losses else float("nan"),
               "step_time": statistics.median(times) if times else float("nan")}
        if evaluate and eval_fn is not None:
            rec.update(eval_fn())
        history.append(rec)
        losses.clear()
        times.clear()

    record(0, True)
    for step in range(1, num_steps + 1):
        t0 = time.perf_counter()
        losses.append(svi.step(*args, **kwargs))
        dt = time.perf_counter() - t0
        elapsed += dt
        times.append(dt)
        if step_times is not None:
            step_times.append(dt)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.4g}")
        done = step == num_steps or (time_budget is not None and elapsed >= time_budget)
        evaluate = step % eval_every == 0 or done
        if evaluate or step % log_every == 0:
            record(step, evaluate)
        if done:
            break
    if bar is not None:
        bar.close()
    return history
