"""What a partition declares about its datasets: where each is staged, where the ranks see it in
the images, and the container's binds (DataSettings, a part of PartitionSettings).
"""

import os

from mlcheck.errors import ConfigError


def bind_pair(bind):
    """(host path, container path) of a `path` or `host:container` bind."""
    src, _, dst = bind.partition(':')
    return src, dst or src


class DataSettings:
    """The data methods of PartitionSettings (its fields datasets, data_mount, container_binds,
    partition)."""

    def data_path_for(self, image_path, data_dir):
        """Where the ranks see dataset directory `data_dir`."""
        return data_dir if image_path is None or not self.data_mount else self.data_mount

    def bind_mounts(self, data_dir):
        """(host path, container path) pairs: the configured binds, and the dataset directory
        (if not None)."""
        pairs = list(map(bind_pair, self.container_binds))
        if data_dir:
            pairs.append((data_dir, self.data_mount or data_dir))
        return pairs

    def dataset_dir(self, name, override='', must_contain=''):
        """The staged directory of dataset `name`, checked to exist (and to hold `must_contain`)."""
        path = override or self.datasets.get(name)
        source = self.dataset_source(name, override)
        if not path:
            raise ConfigError(f'no {name} dataset is configured: set extras.mlcheck.datasets.{name} '
                              f'of partition {self.partition} or pass -S data_dir=DIR')
        if not os.path.isdir(path):
            raise ConfigError(f'{name} dataset directory not found: {path} (from {source})')
        if must_contain and not os.path.exists(os.path.join(path, must_contain)):
            raise ConfigError(f'{name} dataset directory {path} does not hold {must_contain} '
                              f'(from {source})')
        return path

    def dataset_source(self, name, override=''):
        """Where the directory of dataset `name` was given, for messages."""
        return '-S data_dir' if override else f'extras.mlcheck.datasets.{name} of partition {self.partition}'
