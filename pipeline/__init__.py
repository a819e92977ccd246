"""foilforge pipeline: records, I/O, registries, params and the CLI the DVC stages call."""

__version__ = "0.1.0"
