"""Tables in docs/ generated from the code, between two marker lines of their page, each
printed by `python -m <module>` and rewritten in place by `python -m <module> --write`."""

import sys


def with_section(text, begin, end, body):
    """`text` with what lies between the lines `begin` and `end` replaced by `body`."""
    start, stop = text.index(begin) + len(begin), text.index(end)
    return text[:start] + body + text[stop:]


def main(page, begin, end, make):
    """Print make(), or with --write put it in `page` between the markers."""
    if sys.argv[1:] == ['--write']:
        with open(page) as f:
            text = f.read()
        text = with_section(text, begin, end, make())    # before the page is opened for writing
        with open(page, 'w') as f:
            f.write(text)
    else:
        sys.stdout.write(make())
