"""Text from data made safe to show: every control character escaped visibly (issue 48).

Node names, drain reasons, image names, failure reasons and session ids come from perf logs,
results databases and Slurm, which colleagues and other users can write. Printed raw, an escape
sequence in them can hide lines, move the cursor or set the terminal's clipboard (OSC 52), and a
carriage return can overwrite a verdict. Everything the commands print or write as a report goes
through here: `visible` for one value, `shown_safely` for all of a command's output,
`write_escaped` for its report files.
"""

import contextlib
import re
import sys

# C0 and C1 controls, DEL, the Unicode line and paragraph separators, and the bidirectional
# overrides and isolates that reorder what a terminal or an editor shows
_OTHER_CONTROLS = '\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c'
_ANY_CONTROL = re.compile(f'[\x00-\x1f{_OTHER_CONTROLS}]')
_CONTROL_BUT_LINES = re.compile(f'[\x00-\x08\x0b-\x1f{_OTHER_CONTROLS}]')    # \t and \n kept


def _escaped(match):
    code = ord(match[0])
    return f'\\x{code:02x}' if code < 0x100 else f'\\u{code:04x}'


def visible(text, keep_lines=False):
    """`text` with each control character written as its escape (ESC as \\x1b); with `keep_lines`,
    newlines and tabs stay (a whole report), else they are escaped too (one value in one line)."""
    return (_CONTROL_BUT_LINES if keep_lines else _ANY_CONTROL).sub(_escaped, str(text))


class VisibleStream:
    """A text stream that writes everything through visible(keep_lines=True): a command's
    stdout and stderr, and the report files it writes."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        return self._stream.write(visible(text, keep_lines=True))

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextlib.contextmanager
def shown_safely():
    """sys.stdout and sys.stderr through VisibleStream for the block: every line a command prints
    (mlcheck.commands.common.one_line_errors runs each command in it)."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = (s if isinstance(s, VisibleStream) else VisibleStream(s) for s in saved)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def write_escaped(directory, name, text):
    """A report file (report.md, nodes.md) `name` in `directory` (a mlcheck.files.Directory:
    never written through a link) with `text`, its control characters escaped: it is read with
    cat and less as the terminal output is. Returns its path."""
    directory.replace(name, visible(text, keep_lines=True).encode())
    return directory.shown(name)


def control_characters(text):
    """The control characters in `text` (line and paragraph separators among them: Python's
    str.splitlines splits at eight more than newline), each as its escape; '' for none."""
    return ''.join(dict.fromkeys(visible(c) for c in _ANY_CONTROL.findall(text)))
