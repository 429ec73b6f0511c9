"""Scaling efficiency compares a run only with a one-node run of the same settings."""

from types import SimpleNamespace

from mlcheck.history import scaling


def cifar(num_nodes, settings):
    partition = SimpleNamespace(fullname='lumi:standard-g', name='standard-g')
    return type('CIFAR100ResNetCheck', (SimpleNamespace,), {})(
        current_partition=partition, image='pytorch-2.6', num_nodes=num_nodes, run_settings=settings)


def test_this_sessions_one_node_run_of_other_settings_is_not_the_baseline():
    """A 1-node run with -S batch_size=32 (148 images/s per GPU) once became the baseline of a
    default 2-node run (whose 1-node figure is 78)."""
    scaling.record(cifar(1, 'batch_size=32;epochs=3'), 148.0)
    assert scaling._session.get(scaling._key(cifar(2, 'batch_size=128;epochs=3'), 1)) is None
    scaling.record(cifar(1, 'batch_size=128;epochs=3'), 78.0)
    assert scaling._session[scaling._key(cifar(2, 'batch_size=128;epochs=3'), 1)] == 78.0


def test_a_stored_run_counts_only_with_the_same_settings():
    test = cifar(2, 'batch_size=128;epochs=3')
    assert scaling.like({'run_settings': 'batch_size=128;epochs=3'}, test)
    assert not scaling.like({'run_settings': 'batch_size=32;epochs=3'}, test)
    assert not scaling.like({}, test)      # stored before settings were recorded
