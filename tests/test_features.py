"""pyro_ar.features: the standardisation fitted by fit_scaler (dense and scipy.sparse)."""

import numpy as np
import pytest
import scipy.sparse as sp

from pyro_ar.features import MAX_ACTIVE_Z, apply_scaler, fit_scaler


def _mixed_columns(seed, N=301):
    """Dense columns of wildly different units and shapes: gaussian, skewed, integer."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.normal(size=N), rng.lognormal(size=N), rng.integers(0, 17, size=N),
                         rng.standard_t(3, size=N), rng.uniform(size=N)])
    return X * 10.0 ** rng.uniform(-4, 5, size=X.shape[1]) + rng.normal(scale=1e3, size=X.shape[1])


@pytest.mark.parametrize("seed", range(4))
def test_dense_columns_of_any_scale_come_out_with_unit_standard_deviation(seed):
    X = _mixed_columns(seed)
    mean, scale = fit_scaler(X)
    Z = apply_scaler(X, mean, scale)
    np.testing.assert_allclose(Z.mean(0), 0.0, atol=1e-6)  # (float64 cancellation: offset 1e3 over scale 1e-4)
    np.testing.assert_allclose(Z.std(0), 1.0, rtol=1e-6)  # no column floored at another's scale


@pytest.mark.parametrize("seed", range(4))
def test_the_standardised_features_do_not_depend_on_each_columns_units(seed):
    """s_j(c x_j + b) = |c| s_j(x_j): the transformed features (hence the fit) are the same,
    with nearly constant and constant columns among them (exact up to float rounding)."""
    rng = np.random.default_rng(100 + seed)
    X = _mixed_columns(seed)
    X[:, 1] = np.where(rng.random(len(X)) < 0.03, rng.uniform(1, 5, len(X)), 0.0)  # nearly constant
    X[:, 2] = 7.0  # constant
    c = 10.0 ** rng.uniform(-6, 6, X.shape[1])
    c[1:3] = 2.0 ** rng.integers(-20, 20, 2)  # (powers of two: the majority value is represented exactly)
    b = c * rng.normal(scale=10.0, size=X.shape[1])  # (a shift in the column's own units: no digits lost)
    Z = apply_scaler(X, *fit_scaler(X))
    X2 = X * c + b
    np.testing.assert_allclose(apply_scaler(X2, *fit_scaler(X2)), Z, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("p", [1 / 60000, 1e-3, 0.05, 0.4])
def test_a_nearly_constant_column_is_not_blown_up(p):
    """A 0/1 feature active on a fraction p of the rows: its standard deviation would put it at
    sqrt((1 - p) / p) where active (245 at p = 1/60000); its scale is floored at 1 / MAX_ACTIVE_Z
    (the active rows' deviation from the majority value, 1, over 3), so it stays within 3 of 0
    (dense and sparse alike), and a feature active often enough keeps its standard deviation."""
    N = 60000
    x = np.zeros(N)
    x[:max(1, int(round(p * N)))] = 1.0
    X = np.column_stack([x, np.random.default_rng(0).normal(size=N)])
    mean, scale = fit_scaler(X)
    sigma = x.std()
    np.testing.assert_allclose(scale[0], max(sigma, 1.0 / MAX_ACTIVE_Z), rtol=1e-12)
    assert np.abs(apply_scaler(X, mean, scale)[:, 0]).max() <= MAX_ACTIVE_Z
    np.testing.assert_allclose(fit_scaler(sp.csr_matrix(X))[1][0], max(np.sqrt(np.mean(x ** 2)), 1.0 / MAX_ACTIVE_Z),
                               rtol=1e-12)
    if p < 0.1:  # (what the standard deviation alone would have divided by)
        assert np.abs((1 - x.mean()) / sigma) > MAX_ACTIVE_Z


def test_a_majority_value_that_is_not_zero_and_a_constant_column():
    """The majority value m need not be 0: the floor is sqrt(mean over x != m of (x - m)^2) / 3."""
    x = np.full(100, 5.0)
    x[:3] = [8.0, 1.0, 5.0]  # 98 of 100 rows hold 5; the others deviate by 3 and -4
    X = np.column_stack([x, np.full(100, -2.0)])
    floor = np.sqrt((9 + 16) / 2) / MAX_ACTIVE_Z
    assert x.std() < floor  # (the floor is what acts)
    np.testing.assert_allclose(fit_scaler(X)[1], [floor, 1.0], rtol=1e-12)


def test_sparse_scales_are_the_root_mean_square_floored_by_that_of_the_non_zeros():
    rng = np.random.default_rng(3)
    dense = np.zeros((40, 3))
    dense[:5, 0] = rng.normal(size=5)  # zero on most rows
    dense[:36, 1] = rng.normal(size=36)  # non-zero on most rows
    X = sp.csr_matrix(dense)
    X.data[0] = 0.0  # an explicit zero (row 0, column 0) counts as zero
    dense = X.toarray()
    mean, scale = fit_scaler(X)
    active = dense[:, 0][dense[:, 0] != 0]
    rms = np.sqrt(np.mean(dense ** 2, axis=0))
    np.testing.assert_allclose(scale, [max(rms[0], np.sqrt(np.mean(active ** 2)) / MAX_ACTIVE_Z), rms[1], 1.0])
    assert not mean.any()
