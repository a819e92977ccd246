import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(ROOT))

# pytest-xdist runs the suite in processes side by side, as `foilforge repro --jobs N` runs its workers
# (pipeline/runner/repro.py): each takes its share of the cores, and OpenMP's threads sleep rather than spin
# while they wait. Set before torch, numpy or an OpenMP library loads; the commands the tests start inherit it.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_name, str(max(1, (os.cpu_count() or 1) // _WORKERS)))
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# every dvc command a test runs would start DVC's analytics daemon, which reaches for the network
os.environ.setdefault("DVC_NO_ANALYTICS", "1")

import foilforge  # noqa: E402,F401  (first: it pins the OpenBLAS kernels before numpy loads)


def shared_path(*parts) -> Path:
    """A file under ../shared, or skip the test when ../shared is absent (a user's clone)."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not available (../shared/ ships only with the development checkout)")
    return path


@pytest.fixture
def shared():
    return shared_path


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """Directory factory of tiny random models saved with save_pretrained (see tests/tiny_models.py)."""
    from tests import tiny_models as tm

    root = tmp_path_factory.mktemp("tiny-models")
    return tm.TinyModels(root)


@pytest.fixture(autouse=True)
def models_loaded_afresh():
    """Each test loads its models from the files (foilforge/models.py keeps a process's loads for the next stage)."""
    from foilforge.models import forget_loaded

    forget_loaded()
    yield
    forget_loaded()


@pytest.fixture(scope="session", autouse=True)
def gguf_cache(tmp_path_factory):
    """The GGUF conversions of this test session (foilforge/models.py): converted once per session, in a temporary
    directory, never in the user's cache. The xdist workers of one session share it (a conversion is written to a
    temporary directory and renamed: two workers converting at once both load a whole one), so SmolLM2's GGUF is
    converted once, not once a worker."""
    import os

    base = tmp_path_factory.getbasetemp()
    directory = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "gguf-cache"
    directory.mkdir(exist_ok=True)
    previous = os.environ.get("FOILFORGE_GGUF_CACHE")
    os.environ["FOILFORGE_GGUF_CACHE"] = str(directory)
    yield directory
    if previous is None:
        os.environ.pop("FOILFORGE_GGUF_CACHE", None)
    else:
        os.environ["FOILFORGE_GGUF_CACHE"] = previous
