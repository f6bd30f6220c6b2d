# Sourced by the wheel tests (fresh_venv.sh, aarch64_qemu.sh): check_wheel LAUNCHER ARCH packs
# LAUNCHER into a wheel in $work/dist as `make wheel` does and checks it as pip and auditwheel see
# it: its name, a manylinux_2_N_ARCH tag with N <= 34, at most 10 MB, and `auditwheel show`
# (where $peers_python has auditwheel). Sets `wheel` and `name`. Needs $root, $version, $work,
# $peers_python and fail().
check_wheel() {
  local launcher=$1 arch=$2 size policy
  wheel=$(bash "$root/scripts/build-wheel.sh" "$launcher" "$work/dist")
  name=$(basename "$wheel")
  [[ $name =~ ^acc_launch-${version//./\\.}-py3-none-manylinux_2_([0-9]+)_${arch}\.whl$ ]] ||
    fail "unexpected wheel name $name"
  [ "${BASH_REMATCH[1]}" -le 34 ] || fail "$name is tagged manylinux_2_${BASH_REMATCH[1]} (at most 2_34)"
  size=$(stat -c %s "$wheel")
  [ "$size" -le $((10 * 1024 * 1024)) ] || fail "$name is $size bytes (at most 10 MB)"
  echo "PASS: $name, $((size / 1024)) KiB"
  if [ -z "$peers_python" ] || ! "$peers_python" -c 'import auditwheel' 2>/dev/null; then
    echo "auditwheel: not in ${peers_python:-(no peers python)}; its check is not run"
    return
  fi
  "$peers_python" -m auditwheel show "$wheel" >"$work/auditwheel.txt" 2>&1 ||
    fail "auditwheel show: $(cat "$work/auditwheel.txt")"
  policy=$(tr '\n' ' ' <"$work/auditwheel.txt" | grep -oE "manylinux_2_[0-9]+_${arch}" | head -1)
  [[ $policy =~ ^manylinux_2_([0-9]+)_${arch}$ ]] && [ "${BASH_REMATCH[1]}" -le 34 ] ||
    fail "auditwheel show: $(cat "$work/auditwheel.txt")"
  echo "PASS: auditwheel show: $(tr '\n' ' ' <"$work/auditwheel.txt" | sed 's/  */ /g' |
    cut -c1-300)"
}
