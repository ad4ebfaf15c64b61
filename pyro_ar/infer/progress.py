r"""What :func:`~pyro_ar.infer.train` shows while it runs: a tqdm bar of the steps
(:func:`progress_bar`, also for a bar that spans several runs, whose total
:func:`set_progress_total` corrects), or one printed line per record.
"""

import contextlib
import math
import sys
from typing import Dict, Optional

__all__ = ["progress_bar", "set_progress_total", "phase_bar"]


def progress_bar(total: Optional[int] = None, **options):
    """A tqdm progress bar (``tqdm.auto``: a widget in Jupyter, text on stderr elsewhere) of
    ``total`` SVI steps: the bar :func:`~pyro_ar.infer.train` opens for ``progress=True``, and the one to
    open for a bar that spans several :func:`~pyro_ar.infer.train` calls (pass it as ``progress=bar``;
    ``train`` updates it and leaves it open). ``options`` go to ``tqdm`` (``desc``, ``file``,
    ``disable``, ...); the unit is ``"step"`` unless given.

    Example:

    >>> import io
    >>> from pyro_ar.infer.progress import progress_bar
    >>> bar = progress_bar(3, desc="phase 1", file=io.StringIO())
    >>> bar.update(3); bar.close()
    >>> bar.n, bar.total
    (3, 3)
    """
    from tqdm.auto import tqdm

    options.setdefault("unit", "step")
    return tqdm(total=total, **options)


@contextlib.contextmanager
def phase_bar(total: int, desc: str, enabled: bool = True, **options):
    """A :func:`progress_bar` of ``total`` steps labelled ``desc``, open for the ``with`` block
    (a phase of a fit that spans several :func:`~pyro_ar.infer.train` calls) and closed after
    it; ``None`` when not ``enabled``.

    Example:

    >>> import io
    >>> from pyro_ar.infer.progress import phase_bar
    >>> with phase_bar(2, "phase 1", file=io.StringIO()) as bar:
    ...     bar.update(2)
    >>> bar.n, bar.disable   # closed
    (2, True)
    """
    bar = progress_bar(total, desc=desc, **options) if enabled else None
    try:
        yield bar
    finally:
        if bar is not None:
            bar.close()


def set_progress_total(bar, total: int) -> None:
    """Change the ``total`` of a :func:`progress_bar` while it runs (e.g. when a run it counts
    stopped early and its remaining steps will never come), in a terminal and in a Jupyter
    widget alike, and redraw it.

    Example:

    >>> import io
    >>> from pyro_ar.infer.progress import progress_bar, set_progress_total
    >>> bar = progress_bar(10, file=io.StringIO())
    >>> bar.update(4); set_progress_total(bar, 4); bar.close()
    >>> bar.n == bar.total == 4
    True
    """
    bar.total = total
    container = getattr(bar, "container", None)  # tqdm.notebook: the widget's maximum as well
    if container is not None:
        container.children[1].max = total
    bar.refresh()


class _Progress:
    """What :func:`~pyro_ar.infer.train` shows while it runs, from its ``progress`` argument (see there):
    nothing, its own bar, a caller's bar, or printed lines."""

    def __init__(self, progress, clock: str) -> None:
        self.bar, self.own_bar, self.lines, self.postfix = None, False, None, {}
        self.options, self.clock = {}, "CPU s" if clock == "process" else "s"
        style = progress.get("style", "bar") if isinstance(progress, dict) else progress
        if isinstance(progress, dict):
            self.options = {k: v for k, v in progress.items() if k != "style"}
        if progress is None or progress is False:
            return
        if hasattr(progress, "update") and hasattr(progress, "set_postfix"):
            self.bar = progress  # the caller's bar
        elif style == "lines":
            unknown = set(self.options) - {"desc", "file"}
            if unknown:
                raise ValueError(f"progress style 'lines' takes the options 'desc' and 'file', got "
                                 f"{sorted(unknown)} in progress={progress!r}")
            self.lines = self.options
        elif style is True or style == "bar":
            self.own_bar = True
        else:
            raise ValueError("progress must be False, True, 'lines', a dict of options with "
                             "'style' 'bar' or 'lines', or a tqdm bar, got "
                             f"progress={progress!r}")

    def start(self, state: "TrainState") -> None:
        if self.own_bar:
            self.bar = progress_bar(total=state.num_steps, initial=state.step, **self.options)

    def step(self, loss: float) -> None:
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix({"loss": f"{loss:.4g}", **self.postfix}, refresh=False)

    def record(self, rec: Dict, evaluation: Dict) -> None:
        numbers = {k: f"{v:.4g}" for k, v in evaluation.items() if isinstance(v, (int, float))}
        self.postfix = numbers or self.postfix  # the bar keeps showing the last evaluation
        if self.lines is None or (rec["step"] == 0 and not numbers):  # (nothing to say yet)
            return
        desc = self.lines.get("desc")
        parts = [f"step {rec['step']:,}", f"{rec['time']:.1f} {self.clock}"]
        if math.isfinite(rec["loss"]):
            parts.append(f"loss {rec['loss']:.4g}")
        parts += [f"{k} {v}" for k, v in numbers.items()]
        print((f"{desc}: " if desc else "") + ", ".join(parts), file=self.lines.get("file") or sys.stdout,
              flush=True)

    def close(self) -> None:
        if self.own_bar and self.bar is not None:
            self.bar.close()
