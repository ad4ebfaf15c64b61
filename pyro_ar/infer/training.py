"""A small SVI loop that records losses and evaluations against wall time."""

import time
from typing import Callable, Dict, List, Optional

__all__ = ["train"]


def train(svi, *args, num_steps: int = 1000, eval_fn: Optional[Callable[[], Dict]] = None,
          eval_every: Optional[int] = None, time_budget: Optional[float] = None,
          progress: bool = False, **kwargs) -> List[Dict]:
    """Run ``svi.step(*args, **kwargs)`` and return a history of records.

    Each record has ``step``, ``time`` (seconds of training so far, evaluation time
    excluded), ``loss`` (mean of the step losses since the previous record) and whatever
    ``eval_fn()`` returns. Stops after ``num_steps`` or once ``time_budget`` seconds of
    training have elapsed.

    :param progress: show a tqdm progress bar with the running loss.
    """
    history, elapsed, losses = [], 0.0, []
    eval_every = eval_every or max(1, num_steps // 20)
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=num_steps)

    def record(step):
        rec = {"step": step, "time": elapsed,
               "loss": sum(losses) / len(losses) if losses else float("nan")}
        if eval_fn is not None:
            rec.update(eval_fn())
        history.append(rec)
        losses.clear()

    record(0)
    for step in range(1, num_steps + 1):
        t0 = time.perf_counter()
        losses.append(svi.step(*args, **kwargs))
        elapsed += time.perf_counter() - t0
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.4g}")
        done = step == num_steps or (time_budget is not None and elapsed >= time_budget)
        if step % eval_every == 0 or done:
            record(step)
        if done:
            break
    if bar is not None:
        bar.close()
    return history
