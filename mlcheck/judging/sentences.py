"""A sentence that one rule writes into a failure and another part reads back from the stored
text: ReFrame keeps a failed case's reason as text only (its `fail_reason`, the problems joined
by '; '), so a verdict travels in it. The writer's words and the reader's pattern come from one
template, so rewording the sentence rewords what is read.

    SLOW = Sentence('node {node} is slow: {why}', node=NODE)
    SLOW.write(node='nid002', why='every pair')   # 'node nid002 is slow: every pair'
    [m['node'] for m in SLOW.find(stored)]        # ['nid002']
"""

import re

NODE = r'\S+'      # a node's name as written, up to a space (its reader checks it: hostlist.checked)
FREE = r'[^;]*?'                 # any other field: free text, within one problem
FIELD = re.compile(r'\{(\w+)(?::[^}]*)?\}')


class Sentence:
    """`template` in str.format's syntax ({name} or {name:spec}); `fields`: the pattern of a
    field as written, where it is not free text. A match ends where its problem does."""

    def __init__(self, template, **fields):
        self.template = template
        parts = FIELD.split(template)
        unknown = set(fields) - set(parts[1::2])
        if unknown:
            raise ValueError(f'{template!r} has no field {", ".join(sorted(unknown))}')
        self.pattern = re.compile(''.join(
            re.escape(part) if i % 2 == 0 else f'(?P<{part}>{fields.get(part, FREE)})'
            for i, part in enumerate(parts)) + r'(?=;|$)', re.MULTILINE)

    def write(self, **values):
        return self.template.format(**values)

    def find(self, text):
        """Every match in a stored failure's `text` (None or '' for none), in order."""
        return list(self.pattern.finditer(text or ''))

    def cut(self, text):
        """`text` without the sentences."""
        return self.pattern.sub('', text or '')
