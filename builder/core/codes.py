"""The overviews' compact codes (tessera-ovr:code, docs/extensions.md "Embedding overviews"): one class per method.

Each code stands for B-d vectors with a few bytes per pixel: its `code` array (H, W, dims) and `code_scales` (H, W)
float32 (NaN: no data) at every overview level, and a model fitted once per store in arrays of `overviews/`.
The builder encodes with it (`encode`); a reader turns a level's two arrays into per-pixel coordinates
(`coords`: float32 (..., C), NaN in [..., 0] where no data) and computes on those: the reconstructed vectors
(`vectors`), their cosine with a target (`cosine`) or with another code's pixel by pixel (`pairs`), never forming
the B-d vectors where it can avoid it.  `kind` gives the class of a tessera-ovr:code record's method.

- `PCACode` ("pca-int8"): coords = dequantised int8 code z (D values), vector = z @ basis + mean.
- `PQCode` ("pq-uint8"): the unit vector cut into M sub-vectors of B/M bands, each replaced by one of 256
  centroids (`code` holds their indices); code_scales holds the vector's norm.  coords = [norm, i_1 .. i_M],
  vector = norm * (codebook[0, i_1] | .. | codebook[M-1, i_M]).

Pure core: stdlib + numpy (the builder's workers and the explorer in Pyodide share it); fitting is the builder's
(builder/codefit.py).
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from builder.core import extensions as ext
from builder.core.quant import cosine_map_code, cosine_pairs, cosine_pairs_code, dequantise, project, quantise

SCALE_BYTES = 4  # code_scales: one float32 per pixel
CENTROIDS = 256  # a PQ sub-space's centroids: one uint8 index
PAIR_ROWS = 64   # rows of pixels whose B-d vectors `pairs` forms at a time between two codes of different kinds


class Code:
    """What every compact code gives; subclasses set the class attributes and the methods."""
    method: ClassVar[str]       # tessera-ovr:code "method"
    name: ClassVar[str]         # the builder's --code choice
    arrays: ClassVar[dict]      # {array name in overviews/: its dimension_names}, the model's arrays

    @property
    def dims(self) -> int:
        """tessera-ovr:code "dims": the `code` array's last dimension."""
        raise NotImplementedError

    @property
    def bands(self) -> int:
        """B, the reconstructed vectors' length."""
        raise NotImplementedError

    @property
    def width(self) -> int:
        """C, the coordinates' last dimension (`coords`)."""
        raise NotImplementedError

    @classmethod
    def bytes_per_pixel(cls, dims: int) -> int:
        """Bytes a pixel of a level takes before compression: its code and its scale."""
        return dims * np.dtype(ext.OVR_CODE_DTYPES[cls.method]).itemsize + SCALE_BYTES

    @classmethod
    def words(cls, dims: int) -> str:
        """The code in words, for the tools' status and layer lines."""
        raise NotImplementedError

    @classmethod
    def fits(cls, dims: int, n_bands) -> bool:
        """Whether a code of this kind can have `dims` for vectors of n_bands bands (any: nothing to check)."""
        return True

    @classmethod
    def model_shapes(cls, dims: int, n_bands) -> dict[str, tuple]:
        """{tessera-ovr:code key: float32 shape} of the model's arrays for `dims` and n_bands bands (a shape holds
        None where n_bands gives no whole size)."""
        raise NotImplementedError

    def model_arrays(self) -> dict[str, np.ndarray]:
        """{name: float32 values} of the model's arrays (`arrays`)."""
        raise NotImplementedError

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> "Code":
        raise NotImplementedError

    def attrs(self) -> dict:
        """The tessera-ovr:code record of this code."""
        return {"method": self.method, "dims": self.dims,
                **{key: f"{ext.OVR_GROUP}/{name}" for key, name in self.attr_keys.items()}}

    attr_keys: ClassVar[dict]  # {tessera-ovr:code key: model array name}

    def to_json(self) -> dict:
        return {"method": self.method, **{k: v.tolist() for k, v in self.model_arrays().items()}}

    @classmethod
    def from_json(cls, d: dict) -> "Code":
        return cls.from_arrays({name: np.asarray(d[name], np.float32) for name in cls.arrays})

    def encode(self, emb: np.ndarray, scl: np.ndarray, ints: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(code (..., dims), float32 code scales (...), NaN where `scl` is NaN) of quantised vectors (int8 (..., B),
        float32 (...)); `ints`: the valid pixels' int8 vectors as float32 (`emb[~isnan(scl)]`), when the caller has
        them."""
        ok = ~np.isnan(scl)
        code = np.zeros(scl.shape + (self.dims,), dtype=ext.OVR_CODE_DTYPES[self.method])
        scales = np.full(scl.shape, np.nan, dtype=np.float32)
        if ok.any():
            x = emb[ok].astype(np.float32) if ints is None else ints
            code[ok], scales[ok] = self._encode(x, scl[ok].astype(np.float32))
        return code, scales

    def _encode(self, ints: np.ndarray, scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(code (N, dims), scales (N,)) of N valid vectors ints * scales."""
        raise NotImplementedError

    def coords(self, code: np.ndarray, scales: np.ndarray) -> np.ndarray:
        """float32 (..., C) per-pixel coordinates of a level's `code` and `code_scales`; NaN in [..., 0] where no data."""
        raise NotImplementedError

    def vectors(self, coords: np.ndarray) -> np.ndarray:
        """float32 (..., B) reconstructed vectors of coordinates (NaN where no data)."""
        raise NotImplementedError

    def cosine(self, coords: np.ndarray, target: np.ndarray) -> np.ndarray:
        """float32 (...) cosine of each reconstruction with `target` (B,); NaN where no data or a zero vector."""
        raise NotImplementedError

    def pairs(self, coords: np.ndarray, other: "Code", other_coords: np.ndarray) -> np.ndarray:
        """float32 (...) cosine of this code's reconstructions with `other`'s, pixel by pixel (another year's store:
        its own model); NaN where either has no data.  Here by the B-d vectors, a block of rows at a time; a kind
        computes it in its own coordinates where it can."""
        out = np.full(coords.shape[:-1], np.nan, np.float32)
        for r in range(0, coords.shape[0], PAIR_ROWS):
            rows = slice(r, r + PAIR_ROWS)
            out[rows] = cosine_pairs(self.vectors(coords[rows]), other.vectors(other_coords[rows]))
        return out


class PCACode(Code):
    method, name = ext.OVR_PCA, "pca"
    arrays = {ext.OVR_BASIS: ["code", "band"], ext.OVR_MEAN: ["band"]}
    attr_keys = {"basis": ext.OVR_BASIS, "mean": ext.OVR_MEAN}

    def __init__(self, basis: np.ndarray, mean: np.ndarray):
        self.basis = np.asarray(basis, np.float32)  # (D, B) orthonormal rows: the principal axes
        self.mean = np.asarray(mean, np.float32)    # (B,)

    dims = property(lambda self: self.basis.shape[0])
    bands = property(lambda self: self.basis.shape[1])
    width = dims  # coords: the D dequantised values

    @classmethod
    def words(cls, dims: int) -> str:
        return f"the {dims}-d compact code"

    @classmethod
    def model_shapes(cls, dims, n_bands):
        return {"basis": (dims, n_bands), "mean": (n_bands,)}

    def model_arrays(self) -> dict[str, np.ndarray]:
        return {ext.OVR_BASIS: self.basis, ext.OVR_MEAN: self.mean}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> "PCACode":
        return cls(arrays[ext.OVR_BASIS], arrays[ext.OVR_MEAN])

    def to_json(self) -> dict:  # without "method": the build records of stores built before PQ read alike
        return {"mean": self.mean.tolist(), "basis": self.basis.tolist()}

    @classmethod
    def from_json(cls, d: dict) -> "PCACode":
        return cls(np.asarray(d["basis"], np.float32), np.asarray(d["mean"], np.float32))

    def _encode(self, ints, scales):
        return quantise(project(ints, scales, self.mean, self.basis))

    def coords(self, code, scales):
        return dequantise(np.asarray(code, np.int8), scales)

    def vectors(self, coords):
        return (np.asarray(coords, np.float32) @ self.basis + self.mean).astype(np.float32)

    def cosine(self, coords, target):
        return cosine_map_code(coords, self.basis, self.mean, target)

    def pairs(self, coords, other, other_coords):
        if isinstance(other, PCACode):
            return cosine_pairs_code(coords, self.basis, self.mean, other_coords, other.basis, other.mean)
        return super().pairs(coords, other, other_coords)


class PQCode(Code):
    method, name = ext.OVR_PQ, "pq"
    arrays = {ext.OVR_CODEBOOK: ["subspace", "centroid", "band"]}
    attr_keys = {"codebook": ext.OVR_CODEBOOK}

    def __init__(self, codebook: np.ndarray):
        self.codebook = np.asarray(codebook, np.float32)  # (M, 256, B/M)
        m, k, _ = self.codebook.shape
        if k != CENTROIDS:
            raise ValueError(f"a PQ codebook has {CENTROIDS} centroids per sub-space, not {k}")
        self.sq = np.einsum("mks,mks->mk", self.codebook, self.codebook)  # |centroid|^2 (M, 256)

    dims = property(lambda self: self.codebook.shape[0])
    bands = property(lambda self: self.codebook.shape[0] * self.codebook.shape[2])
    width = property(lambda self: self.codebook.shape[0] + 1)  # coords: the norm, then the M indices

    @classmethod
    def words(cls, dims: int) -> str:
        return f"the {dims}-byte PQ code"

    @classmethod
    def fits(cls, dims, n_bands):
        """M sub-vectors of B/M bands each: M must divide B."""
        return isinstance(n_bands, (int, np.integer)) and n_bands % dims == 0

    @classmethod
    def model_shapes(cls, dims, n_bands):
        return {"codebook": (dims, CENTROIDS, n_bands // dims if cls.fits(dims, n_bands) else None)}

    def model_arrays(self) -> dict[str, np.ndarray]:
        return {ext.OVR_CODEBOOK: self.codebook}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> "PQCode":
        return cls(arrays[ext.OVR_CODEBOOK])

    def _encode(self, ints, scales):
        m, _, sub = self.codebook.shape
        size = np.sqrt(np.einsum("nb,nb->n", ints, ints))
        unit = ints / np.where(size > 0, size, 1)[:, None]  # the direction: the scale does not change it
        code = np.empty((len(ints), m), np.uint8)
        for j in range(m):  # nearest centroid: min |c|^2 - 2 x.c (|x|^2 is the same for all)
            code[:, j] = (self.sq[j] - 2 * unit[:, j * sub:(j + 1) * sub] @ self.codebook[j].T).argmin(axis=1)
        return code, (size * scales).astype(np.float32)

    def coords(self, code, scales):
        return np.concatenate([np.asarray(scales, np.float32)[..., None], np.asarray(code, np.float32)], axis=-1)

    def _indices(self, coords) -> list[np.ndarray]:
        """Each sub-space's centroid indices (0 where there are none: no data, or outside a level's grid)."""
        idx = np.nan_to_num(np.asarray(coords)[..., 1:], nan=0).astype(np.intp)
        return [idx[..., j] for j in range(self.dims)]

    def _norm(self, coords) -> np.ndarray:
        """The reconstructions' norms, NaN where no data or a zero vector."""
        n = np.asarray(coords, np.float32)[..., 0]
        return np.where(n > 0, n, np.nan).astype(np.float32)

    def vectors(self, coords):
        idx = self._indices(coords)
        unit = np.concatenate([self.codebook[j][i] for j, i in enumerate(idx)], axis=-1)
        return (unit * np.asarray(coords, np.float32)[..., :1]).astype(np.float32)

    def _sizes(self, idx) -> np.ndarray:
        """|concatenated centroids| (the sub-spaces are orthogonal: the root of their squared norms' sum)."""
        return np.sqrt(sum(self.sq[j][i] for j, i in enumerate(idx)))

    def cosine(self, coords, target):
        m, _, sub = self.codebook.shape
        t = np.asarray(target, np.float32)
        table = np.einsum("mks,ms->mk", self.codebook, t.reshape(m, sub))  # the target's dot with every centroid
        idx = self._indices(coords)
        dot = sum(table[j][i] for j, i in enumerate(idx))
        with np.errstate(invalid="ignore", divide="ignore"):
            sim = dot / (self._sizes(idx) * np.float32(np.linalg.norm(t)))
        sim = np.where(np.isnan(self._norm(coords)), np.nan, sim)
        sim[~np.isfinite(sim)] = np.nan
        return sim.astype(np.float32)

    def pairs(self, coords, other, other_coords):
        if not (isinstance(other, PQCode) and other.codebook.shape == self.codebook.shape):
            return super().pairs(coords, other, other_coords)
        cross = np.einsum("mks,mls->mkl", self.codebook, other.codebook)  # (M, 256, 256) centroid dot products
        a, b = self._indices(coords), other._indices(other_coords)
        dot = sum(cross[j][i, k] for j, (i, k) in enumerate(zip(a, b)))
        with np.errstate(invalid="ignore", divide="ignore"):
            sim = dot / (self._sizes(a) * other._sizes(b))
        sim = np.where(np.isnan(self._norm(coords)) | np.isnan(other._norm(other_coords)), np.nan, sim)
        sim[~np.isfinite(sim)] = np.nan
        return sim.astype(np.float32)


KINDS: dict[str, type[Code]] = {c.method: c for c in (PCACode, PQCode)}
BY_NAME: dict[str, type[Code]] = {c.name: c for c in KINDS.values()}


def kind(method: str | None) -> type[Code]:
    """The class of a tessera-ovr:code method (a record without one is PCA's); ValueError (one line) for another."""
    method = method or ext.OVR_PCA
    if method not in KINDS:
        raise ValueError(f"unknown compact code method {method!r} (known: {', '.join(KINDS)})")
    return KINDS[method]


def from_json(d: dict) -> Code:
    """The code of a build record's model (`to_json`)."""
    return kind(d.get("method")).from_json(d)
