"""The link fault's nftables rules (mlcheck.simulated.faults.slow_links), read without root: the
sender's node by a packet's mark, the receiver's by the cgroup of the socket it reaches."""

import pytest

from mlcheck.simulated import faults


def test_a_link_is_limited_both_ways_between_the_two_nodes_groups(monkeypatch):
    monkeypatch.setattr(faults, 'cgroup2_root', lambda: '/sys/fs/cgroup/unified')
    groups = {n: f'/sys/fs/cgroup/unified/mlcheck-fault-link-{n}' for n in ('nid001', 'nid003')}
    rules = faults.link_rules([('nid001', 'nid003', 500)], groups).splitlines()
    group = 'socket cgroupv2 level 1 "unified/mlcheck-fault-link-{}"'.format
    assert rules[3:] == [
        f'add rule inet mlcheck_fault_links out {group("nid001")} meta mark set 0x6d6c00',
        f'add rule inet mlcheck_fault_links out {group("nid003")} meta mark set 0x6d6c01',
        f'add rule inet mlcheck_fault_links in meta mark 0x6d6c00 {group("nid003")} '
        'limit rate over 500 kbytes/second drop',
        f'add rule inet mlcheck_fault_links in meta mark 0x6d6c01 {group("nid001")} '
        'limit rate over 500 kbytes/second drop']

def test_a_group_is_named_as_nftables_reads_it_where_cgroup2_is_the_root(monkeypatch):
    """On a machine with only cgroup v2, mounted at /sys/fs/cgroup itself."""
    monkeypatch.setattr(faults, 'cgroup2_root', lambda: '/sys/fs/cgroup')
    groups = {n: f'/sys/fs/cgroup/a/{n}' for n in ('nid001', 'nid002')}
    assert 'socket cgroupv2 level 2 "a/nid002"' in faults.link_rules([('nid001', 'nid002', 1)], groups)

def test_the_cgroup2_mount_is_found(tmp_path):
    mounts = tmp_path / 'mounts'
    mounts.write_text('cgroup /sys/fs/cgroup/cpu cgroup rw 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n')
    assert faults.cgroup2_root(str(mounts)) == '/sys/fs/cgroup/unified'
    mounts.write_text('cgroup /sys/fs/cgroup/cpu cgroup rw 0 0\n')
    with pytest.raises(RuntimeError, match='no cgroup v2 hierarchy is mounted'):
        faults.cgroup2_root(str(mounts))

def test_a_link_joins_two_nodes():
    with pytest.raises(ValueError, match='not a node to itself'):
        with faults.slow_links([('nid002', 'nid002')], 500):
            pass
