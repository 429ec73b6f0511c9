"""Reading job output: srun's task labels, split without a regex for speed, read exactly as the
regex of srun --label's format reads them."""

import json
import re

import pytest

from mlcheck.judging import output

# srun --label's format: the task id right-aligned with spaces, ':', one space, the line
LABEL = re.compile(r'^\s*(\d+): ?(.*)$')

LINES = ['0: MLCHECK {"event": "done", "rank": 0}', '  12: NCCL INFO Bootstrap : Using hsn0',
         '3:no space after the colon', '3:  two spaces', '7:', '7: ', ' \t5: a tab before',
         '\xa04: a no-break space before', '\u0663: an Arabic-Indic three', '\xb2: a superscript two',
         '3 : a space before the colon', '-3: a sign', '+3: a sign', '3x: not a number', ': no id',
         'srun: error: nid002: task 3: Exited with exit code 1', 'no colon at all', '', '  ',
         '1_0: an underscore', '007: leading zeros', 'nid001:1234:1234 [0] NCCL INFO x']


@pytest.mark.parametrize('raw', LINES)
def test_labels_are_split_as_the_format_reads_them(raw):
    match = LABEL.match(raw)
    assert output.split_label(raw) == ((int(match.group(1)), match.group(2)) if match else (None, raw))


def test_unlabelled_output_keeps_every_line_whole():
    run = output.parse('3: MLCHECK {"event": "x"}\n4: text\n', labelled=False)
    assert run.facts == [] and run.lines[None] == ['3: MLCHECK {"event": "x"}', '4: text']


@pytest.mark.parametrize('payload', ['{"event": "done", "rank": 0}', ' {"a": 1} ', '{"a": 1}\t', '{"a": 1} x',
                                     '{"a": 1}{"b": 2}', '\ufeff{"a": 1}', '', ' ', '[1]', '1', 'NaN', '{"a": ',
                                     '{"a": 1, "a": 2}', '"text"'])
def test_fact_payloads_are_read_as_json_loads_reads_them(payload):
    def outcome(loads):
        try:
            return loads(payload)
        except ValueError as error:
            return type(error), str(error)
    assert repr(outcome(output.json_document)) == repr(outcome(json.loads))


def test_the_cycle_collector_is_left_as_it_was_found_even_after_an_error():
    import gc
    assert gc.isenabled()
    output.parse('0: MLCHECK {"event": "done", "rank": 0}\n')
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        with output.cyclic_gc_paused():
            assert not gc.isenabled()
            raise RuntimeError('a rule failed')
    assert gc.isenabled()
    gc.disable()
    try:
        output.parse('text\n')
        assert not gc.isenabled()     # the caller's choice stays
    finally:
        gc.enable()
