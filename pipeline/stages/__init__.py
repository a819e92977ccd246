"""Stage entry points: one module per `foilforge` subcommand / DVC stage.

Imports run one way: pipeline.stages -> foilers, filters -> pipeline core (io, records, registry, ...).
"""
