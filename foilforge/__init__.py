"""foilforge's core: records, I/O, errors, registries, the params helpers, the Foiler and Filter
contracts, metrics, provenance and the models layer.

Layers run one way (tests/test_dvc_graph.py checks it): `pipeline` (stages, CLI, annotation app)
imports `foilers` and `filters`, which import only `foilforge`; `foilforge` imports none of them.
"""

__version__ = "0.1.0"
