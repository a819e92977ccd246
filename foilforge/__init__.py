"""foilforge's core: records, I/O, errors, registries, the params helpers, the Foiler and Filter
contracts, metrics, provenance and the models layer.

Layers run one way (tests/test_dvc_graph.py checks it): `pipeline` (stages, CLI, annotation app)
imports `foilers` and `filters`, which import only `foilforge`; `foilforge` imports none of them.
"""

__version__ = "0.1.0"

# Before numpy loads: the OpenBLAS kernels every foilforge process uses (foilforge/host.py)
from foilforge.host import pin_kernels as _pin_kernels  # noqa: E402

_pin_kernels()
del _pin_kernels

# Installed, pipeline/, foilers/ and filters/ are this package's subpackages (pyproject.toml package-dir). In a
# source checkout they are folders beside it: look there too, so `foilforge.pipeline` is the checkout's own
# whichever way the checkout is on sys.path (editable install, PYTHONPATH, the current directory).
from pathlib import Path as _Path  # noqa: E402

_checkout = _Path(__file__).resolve().parent.parent
if (_checkout / "pyproject.toml").is_file() and all((_checkout / name / "__init__.py").is_file()
                                                    for name in ("pipeline", "foilers", "filters")):
    __path__.append(str(_checkout))
del _Path, _checkout
