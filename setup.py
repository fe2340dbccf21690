# `pip install -e . --no-build-isolation` builds the C++ core and the extension with CMake
# (Ninja, ccache when present) against the installed torch, in place under python/.
import os
import subprocess
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    def run(self):
        build_dir = os.path.join(ROOT, "build")
        os.makedirs(build_dir, exist_ok=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
        subprocess.check_call(
            ["cmake", "-G", "Ninja", ROOT, f"-DPython3_EXECUTABLE={sys.executable}",
             "-DCMAKE_BUILD_TYPE=Release", "-DTWGPU_BUILD_EXTENSION=ON"], cwd=build_dir)
        subprocess.check_call(["cmake", "--build", ".", "--", f"-j{jobs}"], cwd=build_dir)


setup(
    name="torch_webgpu",
    version="0.1.0",
    description="PyTorch on WebGPU (Dawn), with a C++ core",
    package_dir={"": "python"},
    packages=find_packages("python"),
    package_data={"torch_webgpu": ["_C*.so", "lib/*.so"]},
    ext_modules=[Extension("torch_webgpu._C", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.10",
)
