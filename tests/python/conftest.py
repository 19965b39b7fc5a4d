"""Shared fixtures of the Python package tests: the lofp command of the same build (LOFP_CLI, set
by tests/script_python.sh) and helpers to run it on files."""
import os
import subprocess

import numpy as np
import pytest


def _cli():
    p = os.environ.get("LOFP_CLI")
    if p and os.path.exists(p):
        return p
    return None


@pytest.fixture(scope="session")
def cli():
    p = _cli()
    if p is None:
        pytest.skip("LOFP_CLI (the lofp command of this build) is not set")
    return p


def run_cli(cli, *args, ok=(0,)):
    r = subprocess.run([cli, *map(str, args)], capture_output=True, text=True)
    if r.returncode not in ok:
        raise AssertionError(f"lofp {' '.join(map(str, args))} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def layer(rng, shape, outliers=True):
    """A transformer-like weight: normal values, a few outlier columns, some exact zeros."""
    x = rng.standard_normal(shape).astype(np.float32) * 0.05
    if outliers:
        x[..., 3] *= 40.0
        x[..., -1] = 0.0
    return x
