"""The wheel's build backend (PEP 517), in the tree: it packs acc-launch as CMake builds it.

What a wheel holds:
  acc_launch/                       the Python package (python/acc_launch/: the hook, checkpoint;
                                    the launcher installs the same files into each run directory)
                                    and _version.py from VERSION
  acc_launch-V.data/scripts/acc-launch
                                    the native binary itself, stripped: pip puts it on the
                                    environment's PATH as it is (no Python shim, so a launch
                                    starts as fast as from a CMake install)
  acc_launch-V.dist-info/           METADATA (from pyproject.toml), WHEEL, RECORD

The binary comes from ACC_LAUNCH_BINARY (what `make wheel` and the tests pass: the build tree's
acc-launch) or, without it, from a Release build of the acc-launch target in build-wheel/ (so
`pip install .` works on a machine with the build's packages: scripts/install-deps.sh).
The platform tag is manylinux_2_<N>_<arch>, N the newest GLIBC_2.N the binary needs (its version
references, read with objdump), never below 2.17. Nothing is downloaded: no build requirement.
"""
import base64
import hashlib
import os
import platform
import re
import shutil
import subprocess
import tempfile
import tomllib
import zipfile

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NAME = "acc_launch"
# A fixed time for every member (or SOURCE_DATE_EPOCH): the same inputs give the same wheel.
_EPOCH = (1980, 1, 1, 0, 0, 0)


def _version():
    with open(os.path.join(_ROOT, "VERSION")) as f:
        return f.read().strip()


def _project():
    with open(os.path.join(_ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _metadata(version):
    project = _project()
    lines = ["Metadata-Version: 2.1", "Name: " + project["name"], "Version: " + version,
             "Summary: " + project["description"],
             "Requires-Python: " + project["requires-python"]]
    for label, url in project.get("urls", {}).items():
        lines.append("Project-URL: %s, %s" % (label, url))
    for classifier in project.get("classifiers", []):
        lines.append("Classifier: " + classifier)
    return "\n".join(lines) + "\n"


def _built_binary():
    binary = os.environ.get("ACC_LAUNCH_BINARY")
    if binary:
        if not os.path.isfile(binary):
            raise RuntimeError("ACC_LAUNCH_BINARY=%s: no such file" % binary)
        return binary
    build = os.path.join(_ROOT, "build-wheel")
    subprocess.run(["cmake", "-S", _ROOT, "-B", build, "-G", "Ninja",
                    "-DCMAKE_BUILD_TYPE=Release", "-DACC_BUILD_TESTS=OFF",
                    "-DACC_BUILD_RUNTIME=OFF"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", build, "--target", "acc-launch"], check=True)
    return os.path.join(build, "launcher", "acc-launch")


def glibc_floor(binary):
    """(2, N): the newest GLIBC_2.N among the binary's version references, at least (2, 17)."""
    out = subprocess.run(["objdump", "-p", binary], check=True, capture_output=True,
                         text=True).stdout
    versions = [(2, int(minor)) for minor in re.findall(r"\bGLIBC_2\.(\d+)", out)]
    return max(versions + [(2, 17)])


def _platform_tag(binary):
    major, minor = glibc_floor(binary)
    return "manylinux_%d_%d_%s" % (major, minor, platform.machine())


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


class _Wheel:
    def __init__(self, path):
        self.zip = zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9)
        self.records = []
        epoch = os.environ.get("SOURCE_DATE_EPOCH")
        self.date = _EPOCH
        if epoch:
            import time
            self.date = max(_EPOCH, time.gmtime(int(epoch))[:6])

    def add(self, arcname, data, mode=0o644):
        info = zipfile.ZipInfo(arcname, self.date)
        info.external_attr = (0o100000 | mode) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        self.records.append(_record_line(arcname, data))

    def close(self, record_name):
        self.records.append(record_name + ",,")
        info = zipfile.ZipInfo(record_name, self.date)
        info.external_attr = 0o100644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, "\n".join(self.records) + "\n")
        self.zip.close()


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _stripped(binary, directory):
    out = os.path.join(directory, "acc-launch")
    subprocess.run(["strip", "--strip-all", "-o", out, binary], check=True)
    return _read(out)


# --- PEP 517 hooks ------------------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    """The METADATA alone, without building acc-launch (pip asks for it first)."""
    dist_info = "%s-%s.dist-info" % (_NAME, _version())
    os.makedirs(os.path.join(metadata_directory, dist_info), exist_ok=True)
    with open(os.path.join(metadata_directory, dist_info, "METADATA"), "w") as f:
        f.write(_metadata(_version()))
    return dist_info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version()
    binary = _built_binary()
    tag = "py3-none-" + _platform_tag(binary)
    wheel_name = "%s-%s-%s.whl" % (_NAME, version, tag)
    dist_info = "%s-%s.dist-info" % (_NAME, version)
    data = "%s-%s.data" % (_NAME, version)
    os.makedirs(wheel_directory, exist_ok=True)
    path = os.path.join(wheel_directory, wheel_name)
    with tempfile.TemporaryDirectory() as scratch:
        wheel = _Wheel(path + ".part")
        package = os.path.join(_ROOT, "python", _NAME)
        for name in sorted(os.listdir(package)):
            if name.endswith(".py"):
                wheel.add("%s/%s" % (_NAME, name), _read(os.path.join(package, name)))
        wheel.add(_NAME + "/_version.py", ('__version__ = "%s"\n' % version).encode())
        wheel.add(data + "/scripts/acc-launch", _stripped(binary, scratch), 0o755)
        wheel.add(dist_info + "/METADATA", _metadata(version).encode())
        wheel.add(dist_info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: acc_build_backend\n"
                                         "Root-Is-Purelib: false\nTag: %s\n" % tag).encode())
        wheel.close(dist_info + "/RECORD")
    os.replace(path + ".part", path)
    return wheel_name
