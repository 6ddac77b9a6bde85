"""Where the tests find the source tree's data, the C CLI and the installed headers.

tests/install/python.sh sets these after installing into a temporary prefix; by hand:
    BACKPLANE_CLI=build/backplane LD_LIBRARY_PATH=build python3 -m pytest python/tests
"""
import os
import shutil

import pytest

SRC = os.environ.get("BACKPLANE_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture(scope="session")
def src():
    return SRC


@pytest.fixture(scope="session")
def cli():
    path = os.environ.get("BACKPLANE_CLI") or shutil.which("backplane")
    assert path, "the C CLI is needed as the reference: set BACKPLANE_CLI or put backplane on PATH"
    return path


@pytest.fixture(scope="session")
def include_dir():
    inc = os.environ.get("BACKPLANE_INCLUDE") or os.path.join(SRC, "include")
    assert os.path.exists(os.path.join(inc, "backplane.h")), inc
    return inc
