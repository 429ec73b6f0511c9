"""The figures that tell the data path from the GPU (mlcheck/figures/data_path.py), and the
partition's GPU peak that one of them needs (extras.mlcheck gpu_peak_tflops)."""

import pytest
from hypothesis import given, strategies as st

from mlcheck.errors import ConfigError
from mlcheck.figures import data_path
from mlcheck.judging import output
from mlcheck.site.settings import PartitionSettings
from saved_outputs import fact_line


def run_with_loaders(*rates):
    return output.parse(''.join(fact_line({'event': 'loader', 'rank': rank, 'images_per_s': rate})
                                for rank, rate in enumerate(rates)), labelled=False)


def test_the_loader_figure_is_the_median_rank_and_absent_without_loader_facts():
    assert data_path.loader_images_per_s(run_with_loaders(900.0, 1000.0, 3000.0)) == 1000.0
    assert data_path.loader_images_per_s(run_with_loaders(0.0, 'x')) is None
    assert data_path.loader_images_per_s(output.parse('', labelled=False)) is None


@given(percent=st.floats(0.01, 100), devices=st.integers(1, 4096), peak=st.floats(1, 5000))
def test_percent_of_peak_gives_back_the_share_it_was_made_from(percent, devices, peak):
    flops = percent / 100 * peak * 1e12 * devices
    assert data_path.percent_of_peak(flops, devices, peak) == pytest.approx(percent, rel=1e-9)


@pytest.mark.parametrize('missing', [(None, 8, 47.9), (1e15, 0, 47.9), (1e15, 8, None), (1e15, 8, True)])
def test_percent_of_peak_is_none_without_all_three_figures(missing):
    assert data_path.percent_of_peak(*missing) is None


def test_the_precision_of_a_run_is_its_autocast():
    assert (data_path.precision(True), data_path.precision(False)) == ('bf16', 'fp32')


def test_sites_declare_one_gcds_or_gpus_peak_and_the_simulated_partition_none(lumi, sim):
    assert lumi.gpu_peak_tflops == {'fp32': 47.9, 'bf16': 191.5}
    assert sim.gpu_peak_tflops == {}


@pytest.mark.parametrize('peak, error', [
    ({'fp32': 0}, r"gpu_peak_tflops.fp32: 0 is not more than 0$"),
    ({'fp16': 10.0}, r'gpu_peak_tflops: unknown key.s. fp16; allowed: bf16, fp32$'),
    ({'bf16': '191'}, r"gpu_peak_tflops.bf16: expected number, got str '191'$")])
def test_a_bad_peak_is_a_one_line_error_naming_the_key(peak, error):
    extras = {'mlcheck': {'topology': {'cores_per_domain': 1, 'gpu_domains': [0]}, 'gpu_peak_tflops': peak}}
    with pytest.raises(ConfigError, match=r'^partition s:p extras.mlcheck.' + error):
        PartitionSettings.from_extras('s:p', extras)
