"""The solo phase measures the work the distributed phase's timed epochs do, under the same
conditions (issue 18, communication efficiency above 100 %): the same steps and batches, warm-up
excluded from both, and timed in the same windows. Timing is faked: each step advances a clock by
the cost of the window it runs in, as a machine whose load changes between epochs would."""

import argparse
import itertools
import json

import pytest
import torch

import solo_phase
from epochs import steady_state
from solo_phase import SoloPhase


class Clock:
    def __init__(self):
        self.now = 0.0
        self.cost = 1.0     # seconds per step in the current window

    def perf_counter(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def run_program(monkeypatch, capsys, epochs, epoch_steps, solo_steps, solo_warmup_steps, costs,
                first_step_cost=None):
    """A training program's loop, one rank: SoloPhase before each epoch's steps, as the programs
    call it; `costs[epoch]` the seconds per step in that epoch's window (the solo steps before it
    included), and `first_step_cost` that of the solo phase's first step. Returns (solo facts,
    steady-state samples/s, batches each phase trained on)."""
    clock = Clock()
    monkeypatch.setattr(solo_phase, 'time', clock)
    trained = {'solo': [], 'epochs': []}
    solo_calls = itertools.count()

    def step(phase):
        def train_step(model, optimizer, batch):
            first_solo = phase == 'solo' and next(solo_calls) == 0
            clock.now += first_step_cost if first_solo and first_step_cost else clock.cost
            trained[phase].append(batch)
            return len(batch)
        return train_step

    args = argparse.Namespace(solo_steps=solo_steps, solo_warmup_steps=solo_warmup_steps,
                              throttle=0.0, throttle_rank=0)
    model = torch.nn.Linear(2, 2)
    solo = SoloPhase(model, lambda m: None, step('solo'), torch.device('cpu'), 0, args,
                     distributed=False)
    stream = iter([batch] * 4 for batch in itertools.count())   # batches of 4 samples
    own = iter([-batch] * 4 for batch in itertools.count(1))    # the solo phase's (private_batches)
    summaries = []
    for epoch in range(1, epochs + 1):
        clock.cost = costs[epoch]
        solo.before_epoch(epoch, epochs, own)
        start = clock.now
        samples = sum(step('epochs')(model, None, next(stream)) for _ in range(epoch_steps))
        summaries.append({'samples': samples, 'seconds': clock.now - start})
    facts = [json.loads(line.split(' ', 1)[1]) for line in capsys.readouterr().out.splitlines()]
    solo_facts = [f for f in facts if f['event'] == 'solo']
    return solo_facts, steady_state(summaries, 1)['samples_per_s'], trained


def test_solo_steps_are_the_timed_epochs_steps_in_their_windows(monkeypatch, capsys):
    """The load differs in every epoch's window: epoch 1 (not timed) slow, then 1 and 3 s per step.
    Timed apart from the epochs, the solo steps saw another load than the epochs they were compared
    with; beside each timed epoch, alone throughput equals distributed throughput without
    communication."""
    solo, steady, trained = run_program(monkeypatch, capsys, epochs=3, epoch_steps=5, solo_steps=30,
                                        solo_warmup_steps=2, costs={1: 9.0, 2: 1.0, 3: 3.0})
    assert len(solo) == 1
    assert solo[0]['steps'] == 30 and solo[0]['samples'] == 120   # --solo-steps, 15 per timed epoch
    assert solo[0]['samples_per_s'] == pytest.approx(steady)       # efficiency 1: no communication
    assert solo[0]['samples_per_s'] == pytest.approx(120 / (15 * 1.0 + 15 * 3.0))


def test_solo_steps_read_their_own_stream_and_leave_the_epochs_batches_alone(monkeypatch, capsys):
    """Solo steps that took the epochs' batches changed what the model learnt: a healthy
    one-epoch MNIST run fell from the calibrated accuracy to 0.29, below its bar."""
    solo, _, trained = run_program(monkeypatch, capsys, epochs=2, epoch_steps=5, solo_steps=3,
                                   solo_warmup_steps=1, costs={1: 1.0, 2: 1.0})
    assert solo[0]['steps'] == 3
    assert [b[0] for b in trained['epochs']] == list(range(10))     # as without a solo phase
    assert [b[0] for b in trained['solo']] == [-1, -2, -3, -4]      # 1 warm-up and 3 timed, its own


def test_solo_steps_leave_the_random_state_as_it_was(monkeypatch):
    """Dropout in the solo copy drew from the same generator as the distributed model's."""
    args = argparse.Namespace(solo_steps=4, solo_warmup_steps=1, throttle=0.0, throttle_rank=0)

    def train_step(model, optimizer, batch):
        torch.rand(8)
        return 1
    solo = SoloPhase(torch.nn.Linear(2, 2), lambda m: None, train_step, torch.device('cpu'), 0, args,
                     distributed=False)
    torch.manual_seed(7)
    solo.before_epoch(1, 1, iter(itertools.repeat([0])))
    after = torch.rand(4)
    torch.manual_seed(7)
    assert torch.equal(after, torch.rand(4))


def test_a_slow_first_solo_step_is_warm_up_and_not_counted(monkeypatch, capsys):
    """A cold first step (allocator, first touch, thread pools) costs 100 s here: the warm-up step
    takes it, as the distributed phase's first epoch takes its own."""
    solo, steady, _ = run_program(monkeypatch, capsys, epochs=2, epoch_steps=4, solo_steps=4,
                                  solo_warmup_steps=1, costs={1: 1.0, 2: 1.0}, first_step_cost=100.0)
    assert solo[0]['seconds'] == pytest.approx(4.0)
    assert solo[0]['samples_per_s'] == pytest.approx(steady) == pytest.approx(1 / 1.0 * 4)


def test_a_single_epoch_is_timed_with_its_solo_steps(monkeypatch, capsys):
    solo, steady, _ = run_program(monkeypatch, capsys, epochs=1, epoch_steps=3, solo_steps=8,
                                  solo_warmup_steps=0, costs={1: 2.0})
    assert solo[0]['steps'] == 8 and solo[0]['samples_per_s'] == pytest.approx(steady)


def test_no_solo_steps_no_solo_fact(monkeypatch, capsys):
    solo, _, trained = run_program(monkeypatch, capsys, epochs=2, epoch_steps=2, solo_steps=0,
                                   solo_warmup_steps=2, costs={1: 1.0, 2: 1.0})
    assert solo == [] and trained['solo'] == []


def test_each_timed_solo_step_s_rate_is_in_the_fact(monkeypatch, capsys):
    """The slow-rank rule compares the ranks' median steps (mlcheck.figures.rank_speed.solo_speeds):
    the fact lists every timed step's samples/s, in order, warm-up excluded."""
    solo, _, _ = run_program(monkeypatch, capsys, epochs=3, epoch_steps=2, solo_steps=4,
                             solo_warmup_steps=1, costs={1: 9.0, 2: 1.0, 3: 2.0}, first_step_cost=100.0)
    assert solo[0]['step_samples_per_s'] == [4.0, 4.0, 2.0, 2.0]     # batches of 4 in 1 s, then 2 s
