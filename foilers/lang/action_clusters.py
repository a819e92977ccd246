"""k-means over action vectors, k by the elbow method, and the elbow report (BD2BB, Pezzelle et al. 2021 §3)."""

from __future__ import annotations


def elbow_k(ks: list[int], inertias: list[float]) -> int:
    """The k whose (normalised) point lies farthest below the chord from the first to the last point."""
    if len(ks) < 3:
        return ks[int(min(range(len(ks)), key=lambda i: inertias[i]))] if len(ks) == 2 else ks[0]
    x0, x1 = ks[0], ks[-1]
    y0, y1 = inertias[0], inertias[-1]
    span_y = (y0 - y1) or 1.0
    best, best_gap = ks[0], float("-inf")
    for k, inertia in zip(ks, inertias):
        x = (k - x0) / (x1 - x0)
        y = (inertia - y1) / span_y
        gap = (1.0 - x) - y  # chord runs from (0, 1) to (1, 0); distance is proportional to this gap
        if gap > best_gap:
            best, best_gap = k, gap
    return best


def cluster_actions(vectors, *, n_clusters: int | None, k_range: list[int], n_init: int, seed: int, progress: bool = False):
    """(labels, {"k", "ks", "inertias", "chosen_by"}) with scikit-learn k-means."""
    from sklearn.cluster import KMeans

    n = len(vectors)
    if n_clusters is not None:
        ks = [min(n_clusters, n)]
    else:
        ks = sorted({min(k, n) for k in k_range if k >= 1})
    fitted, inertias = {}, []
    iterator = ks
    if progress and len(ks) > 1:
        from tqdm import tqdm

        iterator = tqdm(ks, desc="k-means elbow", unit="k")
    for k in iterator:
        model = KMeans(n_clusters=k, n_init=n_init, random_state=seed).fit(vectors)
        fitted[k] = model
        inertias.append(float(model.inertia_))
    k = ks[0] if n_clusters is not None else elbow_k(ks, inertias)
    report = {"k": k, "ks": ks, "inertias": inertias, "chosen_by": "n_clusters" if n_clusters is not None else "elbow"}
    return fitted[k].labels_.tolist(), report


def write_elbow_report(clustering: dict, json_path, png_path=None) -> None:
    """The elbow curve as JSON ({k, ks, inertias, chosen_by, ...}) and, optionally, a PNG plot."""
    from foilforge.io import atomic_write, write_json

    write_json(json_path, clustering)
    if png_path is None:
        return
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(clustering["ks"], clustering["inertias"], marker="o")
    ax.axvline(clustering["k"], color="tab:red", linestyle="--", label=f"k = {clustering['k']} ({clustering['chosen_by']})")
    ax.set_xlabel("k (clusters)")
    ax.set_ylabel("k-means inertia")
    ax.set_title("BD2BB action clusters: elbow")
    ax.legend()
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    plt.close(fig)
    with atomic_write(png_path, "wb") as handle:
        handle.write(buffer.getvalue())
