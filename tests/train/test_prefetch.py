"""Prefetcher: the same batches as the inline iterator, and the checkpointed state is that of the last
consumed batch however far the thread has read ahead."""

import time

import numpy as np
import pytest

from apertus_jax.train.batches import Prefetcher


def _equal(a, b):
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.slow
@pytest.mark.parametrize("depth", [0, 1, 3])
def test_same_batches_and_state_of_the_last_consumed_batch(demo_iterator, depth):
    reference = demo_iterator()
    expected = [next(reference) for _ in range(3)]
    consumed_after_three = reference.consumed()
    expected += [next(reference) for _ in range(3)]
    prefetcher = Prefetcher(demo_iterator(), depth)
    for i in range(3):
        assert _equal(next(prefetcher), expected[i])
    time.sleep(0.3)  # let the thread fill its queue: the state and the counts must not move with it
    assert prefetcher.consumed() == consumed_after_three and consumed_after_three["tokens"]["demo"] > 0
    state = prefetcher.get_state()
    resumed = demo_iterator()
    resumed.set_state(state)
    assert _equal(next(resumed), expected[3])
    for i in range(3, 6):
        assert _equal(next(prefetcher), expected[i])
    prefetcher.close()


def test_set_state_and_close_continue_exactly(demo_iterator):
    reference = demo_iterator()
    expected = [next(reference) for _ in range(5)]
    prefetcher = Prefetcher(demo_iterator(), 2)
    next(prefetcher)
    state = prefetcher.get_state()
    next(prefetcher)
    next(prefetcher)
    prefetcher.set_state(state)  # back to after batch 0, read-ahead discarded
    assert _equal(next(prefetcher), expected[1])
    prefetcher.close()  # the wrapped iterator is put back after batch 1
    assert _equal(next(prefetcher.iterator), expected[2])


class _FailsAfter:
    """The real iterator, raising after `n` batches."""

    def __init__(self, iterator, n):
        self.iterator, self.n = iterator, n

    def __next__(self):
        if self.n == 0:
            raise OSError("shard unreadable")
        self.n -= 1
        return next(self.iterator)

    def get_state(self):
        return self.iterator.get_state()

    def set_state(self, state):
        self.iterator.set_state(state)

    def consumed(self):
        return self.iterator.consumed()


def test_errors_surface_in_order(demo_iterator):
    prefetcher = Prefetcher(_FailsAfter(demo_iterator(), 2), 4)
    next(prefetcher)
    next(prefetcher)
    with pytest.raises(OSError, match="shard unreadable"):
        next(prefetcher)
