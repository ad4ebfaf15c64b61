r"""A rank's own random stream, with its state in a buffer (so checkpoints carry it).

Distributed A&R needs two kinds of randomness: draws every rank must make *alike* (the
class-sharded minibatch, which every rank evaluates) and draws each rank makes *for
itself* (its data shard's minibatch, its class shard's negatives and initial rows). The
first come from torch's global generator, seeded alike on every rank and consumed alike;
the second run inside ``with stream:`` of a :class:`RandomStream`, which swaps the global
CPU generator's state for the stream's own on entry and back on exit. So the library's
samplers (:mod:`pyro_ar.negatives`) and initialisers are used unchanged, and a rank's own
draws, whatever their number, never shift the shared stream.

The stream's state is the buffer ``state``: pass the stream in ``modules=`` of
:func:`pyro_ar.infer.train` and it is saved and restored with the run's checkpoint.
"""

import torch

__all__ = ["RandomStream"]


class RandomStream(torch.nn.Module):
    """A random stream seeded with ``seed``, entered with ``with stream:`` (see the module doc).

    Example:

    >>> import torch
    >>> from pyro_ar.distributed import RandomStream
    >>> stream = RandomStream(seed=7)
    >>> _ = torch.manual_seed(0); before = torch.get_rng_state()
    >>> with stream:
    ...     a = torch.rand(2)
    >>> torch.equal(torch.get_rng_state(), before)    # the global stream did not move
    True
    >>> with RandomStream(seed=7):
    ...     torch.equal(torch.rand(2), a)              # the same seed, the same draws
    True
    """

    def __init__(self, seed: int = 0):
        super().__init__()
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed must be an int, got seed={seed!r}")
        g = torch.Generator().manual_seed(seed)
        self.register_buffer("state", g.get_state())
        self._outer = []

    def __enter__(self):
        self._outer.append(torch.get_rng_state())
        torch.set_rng_state(self.state)
        return self

    def __exit__(self, *exc):
        self.state.copy_(torch.get_rng_state())
        torch.set_rng_state(self._outer.pop())
        return False
