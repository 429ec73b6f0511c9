"""What a partition declares about its NCCL/RCCL network plugin: the log lines that show it was
used, the libfabric provider it must select, from how many nodes on (extras.mlcheck.net_plugin).
"""

import re
from dataclasses import dataclass

from mlcheck.errors import ConfigError


@dataclass(frozen=True)
class NetPlugin:
    """How the NCCL/RCCL network plugin shows, in NCCL_DEBUG=INFO output, that it was used."""
    used_pattern: str         # a line every rank prints when the plugin is loaded
    provider_pattern: str     # a line naming the libfabric provider, in group 'provider'
    provider: str             # the provider expected, e.g. 'cxi'
    # NCCL's words for "no plugin, my own network", which explain a wrong network
    fallback_pattern: str = (r'No plugin found \(libnccl-net\.so\), using internal implementation'
                             r'|Could not find: libnccl-net\.so\.?(?: Using internal network plugin\.)?')
    # the network each communicator finally used, in group 'network'
    network_pattern: str = r'NCCL INFO Using network (?P<network>.*\S)'
    network: str = None       # a regular expression the used network's name must match in full
    # From this many nodes on the ranks must use the plugin. On fewer, NCCL sends nothing over
    # the network (one node: its GPUs' own links) and the plugin may not initialise at all:
    # see the site configs (config/frontier.py) for why.
    from_nodes: int = 2

    @classmethod
    def from_config(cls, entry, where):
        """From a schema-checked entry; the patterns must compile (provider's with its group)."""
        for key, value in entry.items():
            if key.endswith('_pattern'):
                try:
                    compiled = re.compile(value)
                except re.error as err:
                    raise ConfigError(f'{where}.{key}: bad regular expression {value!r}: {err}')
                for name in ('provider', 'network'):
                    if key == f'{name}_pattern' and name not in compiled.groupindex:
                        raise ConfigError(f"{where}.{key}: {value!r} needs a group named {name!r}")
        if 'network' in entry:
            try:
                re.compile(entry['network'])
            except re.error as err:
                raise ConfigError(f'{where}.network: bad regular expression {entry["network"]!r}: {err}')
        return cls(**entry)
