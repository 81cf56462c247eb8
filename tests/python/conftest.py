"""Shared fixtures of the Python suite, and check's summary line at the end (.ci/run counts every test
case of every suite from lines "Checks: N, Failures: F, Errors: E")."""
import os
import zlib

import numpy as np
import pytest

import clattn


def pytest_terminal_summary(terminalreporter):
    stats = terminalreporter.stats
    passed = len(stats.get("passed", []))
    failed = len(stats.get("failed", []))
    errors = len(stats.get("error", []))
    skipped = len(stats.get("skipped", []))
    total = passed + failed + errors + skipped
    percent = 100 * passed // total if total else 0
    # (A skip counts as a failure: nothing in this suite is optional, and CI must not skip silently.)
    terminalreporter.write_line(f"{percent}%: Checks: {total}, Failures: {failed + skipped}, Errors: {errors}")


@pytest.fixture(scope="session")
def ctx():
    return clattn.Context(os.environ.get("CLATTN_TEST_DEVICE"))


def seed_for(name):
    """A test's seed from its name: the same in every process (hash() of a string is salted per process,
    so a failure could not be replayed), printed by pytest with the test's id."""
    return zlib.crc32(name.encode("utf-8"))


@pytest.fixture
def rng(request):
    return np.random.default_rng(seed_for(request.node.name))


# Tolerances against the fp64 reference, per storage type: float32 as the C suites' conformance bound
# (TU_ATOL 1e-5 + TU_RTOL 1e-4 · |ref|, with margin), the 16-bit types by their rounding.
# (2e-5, 2e-4): float32's arithmetic; a result stored in a 16-bit type adds half a unit in that type's last
# place at the value (rounding to nearest: a store that truncates fails).
TOLERANCE = {"float32": (2e-5, 2e-4), "float16": (2e-5, 2e-4), "bfloat16": (2e-5, 2e-4)}
MANTISSA_BITS = {"float32": None, "float16": (10, -14), "bfloat16": (7, -126)}


def half_ulp(ref, dtype):
    """Half a unit in the last place of the 16-bit `dtype` at |ref| (0 for float32)."""
    if MANTISSA_BITS[dtype] is None:
        return 0.0
    bits, min_exp = MANTISSA_BITS[dtype]
    _, e = np.frexp(np.abs(ref))  # |ref| in [2^(e-1), 2^e)
    e = np.maximum(e - 1, min_exp)
    return 0.5 * np.ldexp(1.0, e - bits)


def assert_close(got, ref, dtype="float32", what="out"):
    atol, rtol = TOLERANCE[dtype]
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape, f"{what}: shape {got.shape}, expected {ref.shape}"
    both_inf = np.isinf(ref) & (got == ref)
    err = np.where(both_inf, 0.0, np.abs(got - ref))
    finite_ref = np.where(np.isfinite(ref), ref, 0.0)
    bound = atol + rtol * np.abs(finite_ref) + half_ulp(finite_ref, dtype)
    worst = np.nanmax(err / bound) if err.size else 0.0
    assert np.all(np.isfinite(np.where(both_inf, 0.0, got))), f"{what}: non-finite values"
    assert worst <= 1.0, f"{what}: max error {np.max(err):.3g}, {worst:.3g} x the tolerance ({dtype})"
