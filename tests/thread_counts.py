"""A check several test files share: an op's results keep their bits whatever the
thread count."""
import numpy as np

import aicraft as ac


def assert_same_for_thread_counts(run, counts=(1, 2, 3)):
    """run() returns a list of arrays (or numbers); they must be bit-identical for each
    count. Returns the first count's list."""
    results = []
    previous = ac.get_num_threads()
    try:
        for threads in counts:
            ac.set_num_threads(threads)
            results.append(run())
    finally:
        ac.set_num_threads(previous)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert np.array_equal(a, b)
    return results[0]
