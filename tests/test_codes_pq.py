"""The product-quantisation compact code (tessera-ovr:code "pq-uint8", `build --code pq`): a store built with it by
the real CLI, decoded here with plain numpy from zarr-python reads of code_codebook, code and code_scales (not with
builder/core/codes.py); its accuracy against the PCA store of the same tiles; the explorer's tools on it; validate."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import zarr

from app.tools import region
from conftest import run_async, run_cli
from tools_util import centre_of_data, opened, pixel_lonlat, read_array, training_pixels, zone_vectors

SPAN = 20_000  # metres across the 760 px map: level 2 (40 m), as tests/test_tools_anyzoom.py


def pq_vectors(store: Path, zone: str, k: int) -> np.ndarray:
    """Level k's PQ reconstructions (H, W, B) float64, NaN where no data: each sub-space's centroid looked up by
    its uint8 index, concatenated, times the stored norm (docs/extensions.md)."""
    o = Path(store) / zone / "overviews"
    book = read_array(o / "code_codebook").astype(np.float64)  # (M, 256, B/M)
    code, norm = read_array(o / f"{k}/code"), read_array(o / f"{k}/code_scales").astype(np.float64)
    assert code.dtype == np.uint8 and book.shape[:2] == (code.shape[-1], 256)
    unit = np.concatenate([book[j][code[..., j]] for j in range(book.shape[0])], axis=-1)
    return unit * norm[..., None]


def pca_vectors(store: Path, zone: str, k: int) -> np.ndarray:
    o = Path(store) / zone / "overviews"
    z = read_array(o / f"{k}/code").astype(np.float64) * read_array(o / f"{k}/code_scales")[..., None]
    return z @ read_array(o / "code_basis") + read_array(o / "code_mean")


def recall(full: np.ndarray, approx: np.ndarray, queries: np.ndarray) -> float:
    """Mean share of the 1 % most similar pixels (cosine on the full vectors) among the 1 % most similar by
    `approx` (the query's full vector against the approximations, as the tools compare)."""
    unit = full / np.linalg.norm(full, axis=1, keepdims=True)
    au = approx / np.linalg.norm(approx, axis=1, keepdims=True)
    n = len(full) // 100
    got = []
    for q in queries:
        truth = set(np.argpartition(-(unit @ unit[q]), n)[:n])
        got.append(len(truth & set(np.argpartition(-(au @ unit[q]), n)[:n])) / n)
    return float(np.mean(got))


def code_bytes(store: Path, zone: str) -> int:
    """Bytes per pixel of a level's code + scale, from the arrays' metadata (dtype x last dimension + float32)."""
    a = zarr.open_array(Path(store) / zone / "overviews" / "0" / "code", mode="r")
    return a.dtype.itemsize * a.shape[-1] + 4


def test_pq_store_keeps_more_neighbours_than_pca_at_no_more_bytes(store, pq_store):
    g = zarr.open_group(pq_store / "utm30", mode="r")
    assert g.attrs["tessera-ovr:code"] == {"method": "pq-uint8", "dims": 8, "codebook": "overviews/code_codebook"}
    assert "code_basis" not in g["overviews"] and g["overviews/code_codebook"].shape == (8, 256, 16)
    assert code_bytes(pq_store, "utm30") <= code_bytes(store, "utm30") == 12
    full = zone_vectors(store, "utm30")
    np.testing.assert_array_equal(full, zone_vectors(pq_store, "utm30"))  # the same tiles, the same vectors
    ok = np.isfinite(full[..., 0])
    pq, pca = pq_vectors(pq_store, "utm30", 0), pca_vectors(store, "utm30", 0)
    assert np.array_equal(np.isfinite(pq[..., 0]), ok)
    # the stored norm is the vector's
    np.testing.assert_allclose(read_array(pq_store / "utm30/overviews/0/code_scales")[ok],
                               np.linalg.norm(full[ok].astype(np.float64), axis=1), rtol=1e-5)
    queries = np.random.default_rng(0).choice(int(ok.sum()), 20, replace=False)
    r_pq, r_pca = recall(full[ok], pq[ok], queries), recall(full[ok], pca[ok], queries)
    assert len(full[ok]) > 5_000 and r_pq > r_pca + 0.1, (r_pq, r_pca)


def test_explorer_similarity_and_knn_on_the_pq_code(pq_store, world, monkeypatch):
    from sklearn.neighbors import KNeighborsClassifier

    async def run():
        state = await opened(pq_store)
        # labels at 10 m (full vectors), then a zoomed-out view read as level 2's code
        state.centre_view(*centre_of_data(pq_store, "utm30"), 2500)
        await state.settle()
        train = training_pixels(pq_store, "utm30", world, 2024)
        for r, c, k in train:
            await state.tools.labels.add(*pixel_lonlat(pq_store, "utm30", r, c), cls=f"class {k}")
        monkeypatch.setattr("app.budgets.REGION_BYTES", 1000)
        lon, lat = centre_of_data(pq_store, "utm30")
        await state.select(lon, lat)
        state.centre_view(lon, lat, SPAN)
        state.tools.similarity.param.update(sim_from="selection", on=True)
        await state.settle()
        got = state.tools.similarity.result
        zone, (r0, r1, c0, c1) = got.zone, got.window
        assert (zone.name, zone.level) == ("utm30", 2)
        assert "overview level 2 (40 m pixels), the 8-byte PQ code" in state.status, state.status
        vec = pq_vectors(pq_store, "utm30", 2)[r0:r1, c0:c1]
        t = state.selected.vector.astype(np.float64)
        want = vec @ t / (np.linalg.norm(vec, axis=-1) * np.linalg.norm(t))
        assert np.isfinite(want).sum() > 300
        np.testing.assert_allclose(got.values, want, rtol=0, atol=1e-5, equal_nan=True)
        # k-NN on the same view: the labels' full vectors, the level's PQ reconstructions
        layer = await state.tools.classify.classify("k-NN", seed=3)
        assert layer.zone.level == 2 and layer.window == (r0, r1, c0, c1)
        full = zone_vectors(pq_store, "utm30")
        names = state.tools.labels.names()
        X = np.stack([full[r, c] for r, c, _ in train])
        y = np.array([names.index(f"class {k}") for _, _, k in train])
        valid = np.isfinite(vec[..., 0])
        pred = KNeighborsClassifier(n_neighbors=5).fit(X, y).predict(vec[valid])
        assert np.isnan(layer.values[~valid]).all()
        assert float((layer.values[valid].astype(int) == pred).mean()) >= 0.99
        # the cost line counts the PQ code's bytes: 8 indices + the float32 norm per level-2 pixel
        now, _ = region.cost(region.plans(state.model, state.render_view()))
        zone_plans = region.plans(state.model, state.render_view())
        assert now == sum((w[1] - w[0]) * (w[3] - w[2]) * 12 for _, w, _, use in zone_plans if use == "code")
    run_async(run())


def _copy(store: Path, tmp_path: Path) -> Path:
    s = tmp_path / "2024.zarr"
    shutil.copytree(store, s)
    return s


def test_validate_accepts_the_pq_store_and_refuses_a_wrong_codebook(tmp_path, pq_store):
    p = run_cli("validate", str(pq_store), "--deep")
    assert p.returncode == 0, p.stdout
    s = _copy(pq_store, tmp_path)
    book = zarr.open_group(s / "utm30" / "overviews", mode="r+")
    values = book["code_codebook"][...]
    book.create_array("code_codebook", shape=(8, 128, 16), dtype="float32", overwrite=True)[...] = values[:, :128]
    out = run_cli("validate", str(s), check=False)
    assert out.returncode == 1
    assert "utm30/overviews/code_codebook: float32 (8, 128, 16), expected float32 (8, 256, 16)" in out.stdout, out.stdout
    assert "Traceback" not in out.stdout + out.stderr


def test_validate_deep_finds_pq_codes_that_do_not_encode_their_vectors(tmp_path, pq_store):
    from builder.arrayfiles import ShardedArrayFiles
    s = _copy(pq_store, tmp_path)
    arr = ShardedArrayFiles(s / "utm30" / "overviews" / "1" / "code")
    files = sorted(f for f in (s / "utm30" / "overviews" / "1" / "code" / "c").rglob("*") if f.is_file())
    for f in files:
        sr, sc = int(f.parts[-3]), int(f.parts[-2])
        arr.write(sr, sc, (arr.read(sr, sc).astype(np.int16) + 1).astype(np.uint8))  # every index one off
    assert run_cli("validate", str(s)).returncode == 0
    out = run_cli("validate", str(s), "--deep", check=False)
    assert out.returncode == 1 and "overviews/1/code: sampled codes" in out.stdout, out.stdout


def test_a_pq_store_refuses_a_rebuild_with_the_pca_code_and_pq_dims_must_divide_the_bands(tmp_path, tiles_root):
    tiles = tmp_path / "tiles"
    shutil.copytree(tiles_root, tiles)
    args = ["build", str(tiles), "--year", "2024", "--out", str(tmp_path / "out"), "--scheduler", "sync", "-q",
            "--no-global"]
    p = run_cli(*args, "--code", "pq", "--code-dims", "7", check=False)
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0, p.stderr
    assert "--code-dims 7 must divide the tiles' 128 bands for the PQ code" in p.stderr
    assert not (tmp_path / "out" / "2024.zarr").exists()
    run_cli(*args, "--code", "pq", "--code-dims", "4")
    z = zarr.open_group(tmp_path / "out" / "2024.zarr" / "utm30", mode="r")
    assert z["overviews/code_codebook"].shape == (4, 256, 32) and z["overviews/2/code"].dtype == np.uint8
    p = run_cli(*args, "--code-dims", "4", check=False)  # the default PCA code
    assert p.returncode == 2 and "store has the pq compact code, not pca; rebuild into a new store" in p.stderr
    assert "Traceback" not in p.stderr
    record = json.loads((tmp_path / "out" / "2024.zarr.build" / "record.json").read_text())
    assert record["overviews"]["model"]["method"] == "pq-uint8"
