"""The package's version is the CMake project version, read from ../CMakeLists.txt: one place."""
import os
import re

from setuptools import setup


def cmake_version():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "CMakeLists.txt")
    try:
        with open(path) as f:
            m = re.search(r"project\(\s*backplane\s+VERSION\s+([0-9][0-9.]*)", f.read())
    except OSError as e:
        raise SystemExit(f"backplane: the version is read from {path}: {e}; "
                         "pip install from python/ inside the source tree") from e
    if not m:
        raise SystemExit(f"backplane: no 'project(backplane VERSION x.y.z)' in {path}")
    return m.group(1)


setup(version=cmake_version())
