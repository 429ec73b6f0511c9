"""Which results database the commands read (issue 35 item 8): under config/all.py, the storage
entry of the system this host is, as ReFrame picks it (--system, RFM_SYSTEM, else the first
system whose hostname pattern matches), not the merged file's first entry (Alps's)."""

import os

import pytest

from mlcheck import REPO
from mlcheck.errors import InputError
from mlcheck.history.database import database_of

TWO_SITES = '''
site_configuration = {
    'systems': [{'name': 'far', 'hostnames': [r'far\\d+']}, {'name': 'here', 'hostnames': [%r]}],
    'storage': [{'target_systems': ['far'], 'enable': True, 'sqlite_db_file': '/far.db'},
                {'target_systems': ['here'], 'enable': True, 'sqlite_db_file': '/here.db'}],
}
'''


@pytest.fixture
def clean(monkeypatch):
    for name in ('RFM_SYSTEM', 'RFM_SQLITE_DB_FILE'):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def config(tmp_path, here='.*'):
    path = tmp_path / 'two.py'
    path.write_text(TWO_SITES % here)
    return str(path)


def test_the_storage_of_the_system_this_host_is(tmp_path, clean):
    assert database_of(config(tmp_path)) == '/here.db'


def test_system_and_rfm_system_pick_another(tmp_path, clean):
    assert database_of(config(tmp_path), 'far') == '/far.db'
    clean.setenv('RFM_SYSTEM', 'far:batch')
    assert database_of(config(tmp_path)) == '/far.db'


def test_a_host_no_system_matches_is_asked_for_the_system(tmp_path, clean):
    with pytest.raises(InputError, match='name one with --system=<name> or RFM_SYSTEM=<name>'):
        database_of(config(tmp_path, here='nohost\\d+'))


def test_the_merged_config_reads_this_host_s_site(clean):
    """This host is the simulated cluster's (the catch-all): its database, not daint's."""
    found = database_of(os.path.join(REPO, 'config', 'all.py'))
    assert found == database_of(os.path.join(REPO, 'config', 'simulated.py')) and 'daint' not in found
