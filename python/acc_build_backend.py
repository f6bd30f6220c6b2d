"""The build backend (PEP 517), in the tree: the wheel packs acc-launch as CMake builds it, and
the sdist holds what that build needs.

What a wheel holds:
  acc_launch/                       the Python package (python/acc_launch/: the hook, checkpoint;
                                    the launcher installs the same files into each run directory)
                                    and _version.py from VERSION
  acc_launch-V.data/scripts/acc-launch
                                    the native binary itself, stripped: pip puts it on the
                                    environment's PATH as it is (no Python shim, so a launch
                                    starts as fast as from a CMake install)
  acc_launch-V.dist-info/           METADATA (from pyproject.toml and README.md), WHEEL, RECORD

What an sdist (acc_launch-V.tar.gz) holds: acc_launch-V/PKG-INFO (the same metadata) and the
files of _SDIST: the CMake files, the sources the acc-launch target compiles, the Python package,
VERSION and this backend. No tests, benches, docs, examples or libacc (runtime/, which needs
LibTorch and is no part of the wheel). tests/wheel/sdist.sh checks the list against what the
build reads.

The binary comes from ACC_LAUNCH_BINARY (what `make wheel` and the tests pass: the build tree's
acc-launch) or, without it, from a Release build of the acc-launch target in build-wheel/ (so
`pip install .` and `pip install acc_launch-V.tar.gz` work on a machine with the build's
packages: scripts/install-deps.sh). Where a tool or package of that build is missing, the build
ends with one line that names it and the apt-get command that installs it.
The platform tag is manylinux_2_<N>_<arch>: arch the binary's machine (its ELF header: x86_64 or
aarch64, whatever the build machine is), N the newest GLIBC_2.N the binary needs (its version
references, read with the objdump of its machine: aarch64-linux-gnu-objdump for a cross-built
aarch64 one), never below 2.17. Nothing is downloaded: no build requirement.
"""
import base64
import gzip
import hashlib
import io
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NAME = "acc_launch"
# A fixed time for every member (or SOURCE_DATE_EPOCH): the same inputs give the same wheel.
_EPOCH = (1980, 1, 1, 0, 0, 0)


def _version():
    with open(os.path.join(_ROOT, "VERSION")) as f:
        return f.read().strip()


def _project():
    try:
        import tomllib
    except ImportError:
        raise SystemExit("acc-launch: building from the git tree needs Python 3.11 or newer "
                         "(tomllib reads pyproject.toml); an sdist builds with 3.8 and newer")
    with open(os.path.join(_ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _metadata(version):
    """The core metadata, METADATA of the wheel and PKG-INFO of the sdist. In an unpacked sdist,
    its PKG-INFO as it is: the wheel built from it says the same by construction, and building
    needs no pyproject.toml parser."""
    pkg_info = os.path.join(_ROOT, "PKG-INFO")
    if os.path.isfile(pkg_info):
        return _read(pkg_info).decode("utf-8")
    project = _project()
    readme = project["readme"]
    fields = [("Metadata-Version", "2.2"), ("Name", project["name"]), ("Version", version),
              ("Summary", project["description"]),
              ("Requires-Python", project["requires-python"])]
    fields += [("Project-URL", "%s, %s" % item) for item in project.get("urls", {}).items()]
    fields += [("Classifier", classifier) for classifier in project.get("classifiers", [])]
    fields.append(("Description-Content-Type", readme["content-type"]))
    description = _read(os.path.join(_ROOT, readme["file"])).decode("utf-8")
    return "".join("%s: %s\n" % field for field in fields) + "\n" + description


# --- The wheel's own build of acc-launch --------------------------------------------------------

# The acc-launch target alone, optimised: no tests, benches or libacc, so neither GoogleTest nor
# LibTorch, and none of the directories the sdist leaves out.
CMAKE_OPTIONS = ("-DCMAKE_BUILD_TYPE=Release", "-DACC_BUILD_TESTS=OFF", "-DACC_BUILD_RUNTIME=OFF",
                 "-DACC_BUILD_BENCH=OFF")

# What CMake names when a package of the build is missing (find_package's name, or the variable
# of a find_library/find_path) -> the Debian package that has it.
_DEBIAN_PACKAGE = {
    "CLI11": "libcli11-dev", "yaml-cpp": "libyaml-cpp-dev", "spdlog": "libspdlog-dev",
    "fmt": "libfmt-dev", "Boost": "libboost-dev", "nlohmann_json": "nlohmann-json3-dev",
    "OpenSSL": "libssl-dev", "ACC_LIBURING_ARCHIVE": "liburing-dev",
    "ACC_LIBURING_INCLUDE_DIR": "liburing-dev", "Threads": "libc6-dev",
}
# The Debian packages building acc-launch needs (scripts/install-deps.sh's build-essential and
# some of its others).
_BUILD_PACKAGES = ("g++", "make", "binutils", "cmake", "ninja-build", "libcli11-dev",
                   "libyaml-cpp-dev", "libboost-dev", "libspdlog-dev", "libfmt-dev",
                   "nlohmann-json3-dev", "liburing-dev", "libssl-dev")
_CMAKE_MISSING = (re.compile(r'package configuration file provided by\s+"([\w.+-]+)"'),
                  re.compile(r"Could NOT find ([\w.+-]+)"),
                  re.compile(r"Could not find (ACC_\w+)"))


def _fail(missing, why=None):
    """Ends the build with one line, the last of its output: what is missing (pairs of what and
    the Debian package that has it) and the command that installs it, or else why."""
    if missing:
        named = ", ".join(what if what == package else "%s (%s)" % (what, package)
                          for what, package in missing)
        packages = " ".join(dict.fromkeys(package for _, package in missing))
        line = ("acc-launch: cannot build from source: missing %s; on Debian or Ubuntu, as root: "
                "apt-get install %s" % (named, packages))
    else:
        line = "acc-launch: cannot build from source: " + why
    sys.stdout.flush()
    sys.stderr.write("\n" + line + "\n")
    sys.stderr.flush()
    raise SystemExit(1)


def _generator():
    """The CMake generator (Ninja, else Make), once the tools the build runs are all there."""
    missing = []
    if not shutil.which("cmake"):
        missing.append(("cmake", "cmake"))
    cxx = os.environ.get("CXX", "").split()
    if not (shutil.which(cxx[0]) if cxx else any(map(shutil.which, ("c++", "g++", "clang++")))):
        missing.append(("a C++ compiler", "g++"))
    generator = next((name for tool, name in (("ninja", "Ninja"), ("make", "Unix Makefiles"))
                      if shutil.which(tool)), None)
    if not generator:
        missing.append(("ninja or make", "ninja-build"))
    for tool in ("strip", "objdump"):
        if not shutil.which(tool):
            missing.append((tool, "binutils"))
    if missing:
        _fail(missing)
    return generator


def _debian_missing(packages):
    """Those of the Debian packages dpkg does not have installed (none where there is no dpkg)."""
    if not shutil.which("dpkg-query"):
        return []
    out = subprocess.run(["dpkg-query", "-W", "-f=${Package} ${db:Status-Abbrev}\n", *packages],
                         capture_output=True, text=True).stdout
    installed = {line.split()[0] for line in out.splitlines() if line.split()[1:2] == ["ii"]}
    return [package for package in packages if package not in installed]


def _configure_failed(output):
    """After CMake's output: what it could not find, with every other build package dpkg lacks
    (CMake stops at the first), or, where it names nothing known, all the build packages."""
    names = [match.group(1) for pattern in _CMAKE_MISSING for match in pattern.finditer(output)]
    missing = [(name, _DEBIAN_PACKAGE[name]) for name in dict.fromkeys(names)
               if name in _DEBIAN_PACKAGE]
    if re.search(r"CMake [\d.]+ or higher is required", output):
        missing.append(("CMake 3.22 or newer", "cmake"))
    if "No CMAKE_CXX_COMPILER could be found" in output:
        missing.append(("a C++ compiler", "g++"))
    if missing:
        named = {package for _, package in missing}
        missing += [(package, package) for package in _debian_missing(_BUILD_PACKAGES)
                    if package not in named]
        _fail(missing)
    _fail([], "CMake could not configure the build (its errors above); what it needs, on Debian "
              "or Ubuntu, as root: apt-get install " + " ".join(_BUILD_PACKAGES))


def _built_binary():
    binary = os.environ.get("ACC_LAUNCH_BINARY")
    if binary:
        if not os.path.isfile(binary):
            raise RuntimeError("ACC_LAUNCH_BINARY=%s: no such file" % binary)
        return binary
    build = os.path.join(_ROOT, "build-wheel")
    generator = _generator()
    # A build tree already there keeps the generator it was made with.
    pick = [] if os.path.exists(os.path.join(build, "CMakeCache.txt")) else ["-G", generator]
    configure = subprocess.run(["cmake", "-S", _ROOT, "-B", build, *pick, *CMAKE_OPTIONS],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if configure.returncode != 0:
        sys.stdout.write(configure.stdout)
        _configure_failed(configure.stdout)
    jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
    sys.stdout.flush()
    if subprocess.run(["cmake", "--build", build, "--target", "acc-launch",
                       "--parallel", jobs]).returncode != 0:
        _fail([], "building the acc-launch target in %s failed (the compiler's errors above; "
                  "Debian 12's g++ 12 builds it)" % build)
    return os.path.join(build, "launcher", "acc-launch")


# ELF e_machine -> the wheel's platform machine (what a Linux of that machine's uname -m says).
_ELF_MACHINES = {62: "x86_64", 183: "aarch64"}


def elf_machine(binary):
    """The machine the binary is built for, from its ELF header: "x86_64" or "aarch64" (the
    wheel's tag names the binary's machine, which a cross build's is not the build machine's)."""
    with open(binary, "rb") as f:
        header = f.read(20)
    if len(header) < 20 or header[:4] != b"\x7fELF" or header[5] not in (1, 2):
        raise RuntimeError("%s: not an ELF binary" % binary)
    machine = int.from_bytes(header[18:20], "little" if header[5] == 1 else "big")
    if machine not in _ELF_MACHINES:
        raise RuntimeError("%s: an ELF binary for machine %d, neither x86-64 nor aarch64"
                           % (binary, machine))
    return _ELF_MACHINES[machine]


def binutils(binary, tool):
    """The binutils tool ("objdump", "strip") that reads the binary: the build machine's for its
    own machine, else the cross one, <machine>-linux-gnu-<tool> (Debian's binutils-<machine>-linux-
    gnu; the build machine's GNU binutils read their own machine only)."""
    machine = elf_machine(binary)
    if machine == platform.machine():
        return tool
    cross = "%s-linux-gnu-%s" % (machine, tool)
    if not shutil.which(cross):
        _fail([(cross, "binutils-%s-linux-gnu" % machine)])
    return cross


def glibc_floor(binary):
    """(2, N): the newest GLIBC_2.N among the binary's version references, at least (2, 17)."""
    out = subprocess.run([binutils(binary, "objdump"), "-p", binary], check=True,
                         capture_output=True, text=True).stdout
    versions = [(2, int(minor)) for minor in re.findall(r"\bGLIBC_2\.(\d+)", out)]
    return max(versions + [(2, 17)])


def _platform_tag(binary):
    major, minor = glibc_floor(binary)
    return "manylinux_%d_%d_%s" % (major, minor, elf_machine(binary))


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
    subprocess.run([binutils(binary, "strip"), "--strip-all", "-o", out, binary], check=True)
    return _read(out)


# --- The sdist -------------------------------------------------------------------------------

# What the sdist holds, files and directories of the tree: what configuring and building the
# acc-launch target with CMAKE_OPTIONS reads, and what a wheel packs besides. LICENSE where there
# is one.
_SDIST = ("CMakeLists.txt", "VERSION", "pyproject.toml", "README.md", "LICENSE", "cmake",
          "common", "config", "rendezvous", "launcher", "python/acc_build_backend.py",
          "python/acc_launch")
_SDIST_OPTIONAL = ("LICENSE",)


def sdist_files():
    """The sdist's files, paths relative to the tree, sorted; no caches or hidden files."""
    files = []
    for entry in _SDIST:
        path = os.path.join(_ROOT, entry)
        if os.path.isfile(path):
            files.append(entry)
        elif os.path.isdir(path):
            for directory, subdirectories, names in os.walk(path):
                subdirectories[:] = [d for d in subdirectories
                                     if d != "__pycache__" and not d.startswith(".")]
                files += [os.path.relpath(os.path.join(directory, name), _ROOT) for name in names
                          if not name.startswith(".") and not name.endswith(".pyc")]
        elif entry not in _SDIST_OPTIONAL:
            raise RuntimeError("%s: missing from %s, and the sdist needs it" % (entry, _ROOT))
    return sorted(files)


def _source_date():
    """The time of every member, in seconds: SOURCE_DATE_EPOCH, or the wheel's 1980-01-01."""
    return max(315532800, int(os.environ.get("SOURCE_DATE_EPOCH") or 0))


# --- PEP 517 hooks ------------------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    """The METADATA alone, without building acc-launch (pip asks for it first)."""
    dist_info = "%s-%s.dist-info" % (_NAME, _version())
    os.makedirs(os.path.join(metadata_directory, dist_info), exist_ok=True)
    with open(os.path.join(metadata_directory, dist_info, "METADATA"), "w") as f:
        f.write(_metadata(_version()))
    return dist_info


def build_sdist(sdist_directory, config_settings=None):
    """acc_launch-V.tar.gz: acc_launch-V/ with PKG-INFO and sdist_files(). The same tree gives
    the same bytes (fixed times and owners, sorted members)."""
    version = _version()
    top = "%s-%s" % (_NAME, version)
    os.makedirs(sdist_directory, exist_ok=True)
    path = os.path.join(sdist_directory, top + ".tar.gz")
    date = _source_date()
    members = [("PKG-INFO", _metadata(version).encode(), 0o644)]
    for name in sdist_files():
        full = os.path.join(_ROOT, name)
        members.append((name, _read(full), 0o755 if os.stat(full).st_mode & 0o111 else 0o644))
    with open(path + ".part", "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=date) as compressed:
            with tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT) as tar:
                for name, data, mode in members:
                    info = tarfile.TarInfo("%s/%s" % (top, name))
                    info.size, info.mode, info.mtime = len(data), mode, date
                    tar.addfile(info, io.BytesIO(data))
    os.replace(path + ".part", path)
    return top + ".tar.gz"


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
