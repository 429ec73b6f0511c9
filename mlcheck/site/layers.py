"""What a partition declares about candidate host layers (extras.mlcheck.host_layer_candidates):
network plugins and libraries the admins may install, each a set of binds, variables and (on the
Container Engine) annotations, and the partition's settings with one of them over its current
layer (LayerSettings, a part of PartitionSettings), which `-S compare_layers=NAME` runs as side B
of its A/B rounds (docs/ab-images.md).
"""

import dataclasses
from dataclasses import dataclass, field

from mlcheck.errors import ConfigError
from mlcheck.site.data import bind_pair


@dataclass(frozen=True)
class HostLayer:
    """One candidate: binds added to the partition's (one to the same container path replaces
    it), variables over the image's and the EDF's, annotations over the EDF's."""
    name: str
    binds: tuple = ()
    env_vars: dict = field(default_factory=dict)
    annotations: dict = field(default_factory=dict)

    @classmethod
    def from_config(cls, name, entry):
        """From a schema-checked entry of extras.mlcheck.host_layer_candidates."""
        return cls(name, tuple(entry.get('binds', ())), dict(entry.get('env_vars', {})),
                   dict(entry.get('annotations', {})))


CURRENT = HostLayer('')     # the partition's own host layer: nothing over it


class LayerSettings:
    """The host layer methods of PartitionSettings (its fields host_layer_candidates, host_layer,
    container_binds, partition)."""

    def with_host_layer(self, name):
        """These settings with candidate `name` over the partition's current host layer."""
        layer = self.host_layer_candidates.get(name)
        if layer is None:
            declared = ', '.join(sorted(self.host_layer_candidates)) or 'none'
            raise ConfigError(f'-S compare_layers={name}: partition {self.partition} declares no host '
                              f'layer {name!r} (extras.mlcheck.host_layer_candidates: {declared})')
        replaced = {bind_pair(bind)[1] for bind in layer.binds}
        binds = [bind for bind in self.container_binds if bind_pair(bind)[1] not in replaced]
        return dataclasses.replace(self, container_binds=(*binds, *layer.binds), host_layer=layer)
