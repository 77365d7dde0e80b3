"""Fast, bit-identical stand-ins for the scipy.ndimage interpolation the brain generators call most.

scipy's ``geometric_transform`` C loop (behind ``zoom``, ``affine_transform`` and ``map_coordinates``) recomputes the
spline taps and weights of every output voxel for every array, with per-voxel index arithmetic: upsampling each
study's bias field with ``ndimage.zoom(order=3)`` was half of the brain cohort's generation time, and the trilinear
warps (the mass effect's four tissue maps, a follow-up study's four sequences onto its scanner grid) most of the rest.
:func:`linear_map` and :func:`linear_affine` find the taps and weights the way scipy's ``ni_interpolation.c`` and
``ni_splines.c`` do, once for all arrays on one grid, and do the per-voxel arithmetic with numpy in the C loop's
order -- the same products, added in the same sequence, in float64, cast once; :func:`cubic_zoom` evaluates its
spline one axis at a time and falls back to the C loop's order where that could round differently. The generated
files keep their bytes (tests compare each stand-in with scipy, bit for bit).
"""

from __future__ import annotations

import numpy as np

# How far the axis-by-axis evaluation of :func:`cubic_zoom` and scipy's 64-term sum can be apart, relative to the
# largest spline coefficient (each weight is at least -1e-16 and a voxel's weights along one axis sum to 1, so
# the exact sum is at most that coefficient in size): the two float64 evaluations' rounding errors add up to
# under 1e-14 of it (67 and 15 roundings of 2**-53 at most); 1e-13 leaves a margin.
SUM_ERROR = 1e-13


def _mirror(index: np.ndarray, length: int) -> np.ndarray:
    """Spline taps beyond the edge, reflected about the edge samples (scipy's NI_EXTEND_MIRROR)."""
    if length <= 1:
        return np.zeros_like(index)
    period = 2 * length - 2
    index = index.copy()
    low = index < 0
    folded = period * (-index[low] // period) + index[low]
    index[low] = np.where(folded <= 1 - length, folded + period, -folded)
    high = index >= length
    folded = index[high] - period * (index[high] // period)
    index[high] = np.where(folded >= length, period - folded, folded)
    return index


def _cubic_taps(size_in: int, size_out: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(input index, weight) of the 4 cubic B-spline taps of every output position along one axis of
    ``ndimage.zoom(order=3, mode="constant")``, and which positions fall inside the input (the rest are 0)."""
    zoom = (size_in - 1) / (size_out - 1) if size_out > 1 else 1.0
    position = np.arange(size_out, dtype=np.float64) * zoom
    floor = np.floor(position)
    start = floor.astype(np.int64) - 1
    x = position - floor
    y, z = x, 1.0 - x
    weights = np.empty((size_out, 4))
    weights[:, 1] = (y * y * (y - 2.0) * 3.0 + 4.0) / 6.0
    weights[:, 2] = (z * z * (z - 2.0) * 3.0 + 4.0) / 6.0
    weights[:, 0] = z * z * z / 6.0
    weights[:, 3] = 1.0 - weights[:, 0] - weights[:, 1] - weights[:, 2]
    taps = start[:, None] + np.arange(4)
    edge = (start < 0) | (start + 3 >= size_in)
    taps[edge] = _mirror(taps[edge], size_in)
    return taps, weights, position <= size_in - 1


def cubic_zoom(coarse: np.ndarray, shape: tuple[int, int, int]) -> np.ndarray:
    """``ndimage.zoom(coarse, [n / m for n, m in zip(shape, coarse.shape)], order=3)`` of a small 3-D float32
    array, bit for bit, dozens of times faster. scipy sums each output voxel's 64 spline terms
    ``((c * w0) * w1) * w2`` in float64 (last axis fastest) and rounds the sum to float32; here the spline is
    evaluated one axis at a time, which lands within :data:`SUM_ERROR` of scipy's sum, so it rounds to the same
    float32 wherever no rounding boundary is that near -- everywhere but a few voxels per million, which get
    scipy's own sum of their 64 terms."""
    from scipy import ndimage

    if coarse.ndim != 3 or len(shape) != 3:
        raise ValueError("cubic_zoom takes a 3-D array and a 3-D output shape")
    coefficients = ndimage.spline_filter(coarse, 3, output=np.float64, mode="constant")
    axes = [_cubic_taps(size_in, size_out) for size_in, size_out in zip(coarse.shape, shape)]
    matrices = []  # per axis and output position, the weight of each coefficient (mirrored taps add up)
    for (taps, weights, _), size_in in zip(axes, coarse.shape):
        matrix = np.zeros((len(taps), size_in))
        np.add.at(matrix, (np.arange(len(taps))[:, None], taps), weights)
        matrices.append(matrix)
    along2 = np.einsum("tuv,kv->tuk", coefficients, matrices[2])
    along1 = np.einsum("tuk,ju->tjk", along2, matrices[1])
    total = matrices[0][:, 0, None, None] * along1[0]
    for index in range(1, coarse.shape[0]):
        total += matrices[0][:, index, None, None] * along1[index]
    result = total.astype(np.float32)
    # a float32 rounds every float64 between the midpoints to its neighbours (exact in float64); scipy's sum rounds
    # to the same float32 where the error bound keeps it between them
    error = SUM_ERROR * np.abs(coefficients).max()
    below = (result + np.nextafter(result, np.float32(-np.inf)).astype(np.float64)) / 2
    above = (result + np.nextafter(result, np.float32(np.inf)).astype(np.float64)) / 2
    unsettled = np.unravel_index(np.flatnonzero((total - error <= below) | (total + error >= above)), shape)
    result[unsettled] = _spline_sums(coefficients, axes, unsettled)
    result[~axes[0][2]] = 0.0
    result[:, ~axes[1][2]] = 0.0
    result[:, :, ~axes[2][2]] = 0.0
    return result


def _spline_sums(coefficients: np.ndarray, axes: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
                 voxels: tuple[np.ndarray, np.ndarray, np.ndarray]) -> np.ndarray:
    """scipy's sum at some output voxels: from 0.0, the 64 terms ``((c * w0) * w1) * w2``, last axis fastest."""
    (taps0, weights0), (taps1, weights1), (taps2, weights2) = (
        (taps[index], weights[index]) for (taps, weights, _), index in zip(axes, voxels))
    total = np.zeros(len(voxels[0]))
    for a in range(4):
        for b in range(4):
            for c in range(4):
                term = coefficients[taps0[:, a], taps1[:, b], taps2[:, c]] * weights0[:, a]
                term *= weights1[:, b]
                term *= weights2[:, c]
                total += term
    return total


LINEAR_BLOCK = 1 << 16  # output voxels sampled at once: their taps, weights and terms stay in the CPU cache


def linear_map(arrays: list[np.ndarray], coordinates: list[np.ndarray] | np.ndarray) -> list[np.ndarray]:
    """``ndimage.map_coordinates(array, coordinates, order=1, mode="nearest")`` of each 3-D floating-point array
    in ``arrays`` (one shape), bit for bit: the taps and weights found once for all of them. ``coordinates``: one
    array of input positions per axis, of one shape (the output's)."""
    if len(coordinates) != 3 or len({np.shape(axis) for axis in coordinates}) != 1:
        raise ValueError("linear_map takes 3-D arrays and one coordinate array per axis, of one shape")
    sampler = _Trilinear(arrays, "nearest")
    shape = np.shape(coordinates[0])
    flat = [np.asarray(axis).reshape(-1) for axis in coordinates]
    results = [np.empty(flat[0].size, dtype=dtype) for dtype in sampler.dtypes]
    for start in range(0, flat[0].size, LINEAR_BLOCK):
        block = slice(start, start + LINEAR_BLOCK)
        for result, value in zip(results, sampler.sample([axis[block].astype(np.float64) for axis in flat])):
            result[block] = value
    return [result.reshape(shape) for result in results]


def linear_affine(arrays: list[np.ndarray], matrix: np.ndarray, offset: np.ndarray,
                  shape: tuple[int, int, int]) -> list[np.ndarray]:
    """``ndimage.affine_transform(array, matrix, offset, output_shape=shape, order=1)`` (0 outside the input) of
    each 3-D floating-point array in ``arrays`` (one shape), bit for bit: every output voxel's input position
    computed as scipy does (``((offset + i * m0) + j * m1) + k * m2``, in float64), its taps and weights once for
    all arrays."""
    matrix, offset = np.asarray(matrix, dtype=np.float64), np.asarray(offset, dtype=np.float64)
    if matrix.shape != (3, 3) or offset.shape != (3,) or len(shape) != 3:
        raise ValueError("linear_affine takes 3-D arrays, a 3x3 matrix and 3 offsets")
    sampler = _Trilinear(arrays, "constant")
    n0, n1, n2 = shape
    results = [np.empty(shape, dtype=dtype) for dtype in sampler.dtypes]
    planes = max(1, LINEAR_BLOCK // max(n1 * n2, 1))
    j, k = np.arange(n1, dtype=np.float64)[:, None], np.arange(n2, dtype=np.float64)
    for start in range(0, n0, planes):
        i = np.arange(start, min(start + planes, n0), dtype=np.float64)[:, None, None]
        position = [(((offset[axis] + i * matrix[axis, 0]) + j * matrix[axis, 1]) + k * matrix[axis, 2]).reshape(-1)
                    for axis in range(3)]
        for result, value in zip(results, sampler.sample(position)):
            result[start:start + len(i)] = value.reshape(len(i), n1, n2)
    return results


class _Trilinear:
    """The order-1 spline values of some arrays of one shape, as ``NI_GeometricTransform`` computes them: per axis
    the taps ``floor(x)`` and ``floor(x) + 1`` with weights ``1 - f`` and ``1 - (1 - f)`` (``f = x - floor(x)``),
    taps beyond the edge clamped (mode "nearest") or mirrored (mode "constant", whose points outside
    ``[0, n - 1]`` on any axis are 0); the 8 terms ``((c * w0) * w1) * w2`` summed from 0.0 with the last axis
    fastest, cast to the array's type once. A point whose taps all read 0 is 0 (every term is +-0): the brains
    fill a quarter of their grids, so only points next to a non-zero input voxel are computed."""

    def __init__(self, arrays: list[np.ndarray], mode: str):
        arrays = [np.asarray(array) for array in arrays]
        if any(array.ndim != 3 or array.shape != arrays[0].shape or not np.issubdtype(array.dtype, np.floating)
               for array in arrays):
            raise ValueError("the linear stand-ins take 3-D floating-point arrays of one shape")
        self.mode, self.size = mode, arrays[0].shape
        self.dtypes = [array.dtype for array in arrays]
        self.flats = [array.astype(np.float64).reshape(-1) for array in arrays]  # the C loop reads them as double
        self.strides = [int(np.prod(self.size[axis + 1:], dtype=np.int64)) for axis in range(3)]
        support = np.zeros(self.size, dtype=bool)
        for array in arrays:
            support |= array != 0
        for axis in range(3):  # grown by one voxel along every axis: every tap of a point is next to its first one
            grown = support.copy()
            lower, upper = [slice(None)] * 3, [slice(None)] * 3
            lower[axis], upper[axis] = slice(None, -1), slice(1, None)
            grown[tuple(lower)] |= support[tuple(upper)]
            grown[tuple(upper)] |= support[tuple(lower)]
            support = grown
        self.support = support.reshape(-1)

    def sample(self, position: list[np.ndarray]) -> list[np.ndarray]:
        """The arrays' values at ``position`` (per axis, the points' float64 input voxel coordinates)."""
        count = len(position[0])
        outside = np.zeros(count, dtype=bool)
        first, floors = np.zeros(count, dtype=np.int64), []
        for axis, length in enumerate(self.size):
            x = position[axis]
            if self.mode == "constant":
                outside |= (x < 0) | (x > length - 1)
            floor = np.floor(x)
            floors.append(floor)
            first += np.clip(floor, 0, length - 1).astype(np.int64) * self.strides[axis]
        computed = np.flatnonzero(self.support[first] & ~outside)
        offsets, weights = [], []
        for axis, length in enumerate(self.size):
            x, floor = position[axis][computed], floors[axis][computed]
            low = 1.0 - (x - floor)
            taps = floor.astype(np.int64)[None] + np.arange(2)[:, None]
            taps = np.clip(taps, 0, length - 1) if self.mode == "nearest" else _mirror_taps(taps, length)
            offsets.append(taps * self.strides[axis])
            weights.append((low, 1.0 - low))
        corners = [(a, b, c) for a in range(2) for b in range(2) for c in range(2)]
        index = [offsets[0][a] + offsets[1][b] + offsets[2][c] for a, b, c in corners]
        results = []
        for flat, dtype in zip(self.flats, self.dtypes):
            total = np.zeros(len(computed))
            term = np.empty_like(total)
            for tap, (a, b, c) in zip(index, corners):
                np.multiply(flat[tap], weights[0][a], out=term)
                term *= weights[1][b]
                term *= weights[2][c]
                total += term
            value = np.zeros(count, dtype=dtype)
            value[computed] = total
            results.append(value)
        return results


def _mirror_taps(taps: np.ndarray, length: int) -> np.ndarray:
    """Taps mirrored at the edges where they leave the input (scipy applies it only there)."""
    edge = (taps < 0) | (taps >= length)
    if edge.any():
        taps = taps.copy()
        taps[edge] = _mirror(taps[edge], length)
    return taps
