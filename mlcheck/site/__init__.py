"""The site model: a partition's extras.mlcheck as settings, and their JSON Schema."""
