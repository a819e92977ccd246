import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(ROOT))

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
