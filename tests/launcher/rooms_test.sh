#!/usr/bin/env bash
# The launcher's rooms (docs/architecture.md, "The launcher's rooms") as the build enforces them:
# with the include flags CMake gives a room's sources (FLAGS_DIR/<room>.flags, written at configure
# time from the room's target), a file includes a header of its own room or of any room below it,
# private ("room/name.h") and public ("acc/launcher/room/name.h") alike, and no header of a room
# above it: that include fails to compile, naming the header. And every header of a room compiles
# with its room's flags, so that a header no source of its room includes holds to the order too.
# Usage: rooms_test.sh CXX LAUNCHER_SOURCE_DIR FLAGS_DIR ROOM... (the rooms lowest first: a room
# is below every room after it)
set -euo pipefail
cxx=$1
launcher=$2
flags_dir=$3
shift 3
rooms=("$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

[ "${#rooms[@]}" -ge 2 ] || { echo "expected the launcher's rooms, got: ${rooms[*]}" >&2; exit 2; }

# One header of each room, private and, where the room has them, public: the first by name.
probe_rooms=()
probe_headers=()
for j in "${!rooms[@]}"; do
  room=${rooms[$j]}
  private=$(cd "$launcher/src" && ls "$room"/*.h | head -n 1)
  [ -n "$private" ] || { echo "room $room has no header" >&2; exit 2; }
  probe_rooms+=("$j")
  probe_headers+=("$private")
  if [ -d "$launcher/include/acc/launcher/$room" ]; then
    probe_rooms+=("$j")
    probe_headers+=("$(cd "$launcher/include" && ls acc/launcher/"$room"/*.h | head -n 1)")
  fi
done

for i in "${!rooms[@]}"; do
  room=${rooms[$i]}
  flags="$flags_dir/$room.flags"
  [ -s "$flags" ] || { echo "no include flags for room $room ($flags)" >&2; exit 2; }
  for k in "${!probe_headers[@]}"; do
    j=${probe_rooms[$k]}
    header=${probe_headers[$k]}
    file="$work/$room.$k.cc"
    printf '#include "%s"\n' "$header" >"$file"
    if "$cxx" -std=c++20 -E -o /dev/null @"$flags" "$file" 2>"$file.err"; then
      [ "$j" -le "$i" ] || fail "room $room includes $header, of a room above it"
    elif [ "$j" -le "$i" ]; then
      fail "room $room cannot include $header, of its own room or one below:"$'\n'"$(<"$file.err")"
    elif ! grep -q "$header: No such file or directory" "$file.err"; then
      # The include against the order must fail because the header is out of reach, nothing else.
      fail "room $room including $header failed otherwise:"$'\n'"$(<"$file.err")"
    fi
  done
done
# Each room's headers, all of them, with its own flags.
for room in "${rooms[@]}"; do
  file="$work/$room.all.cc"
  (cd "$launcher/src" && ls "$room"/*.h) | sed 's/.*/#include "&"/' >"$file"
  if [ -d "$launcher/include/acc/launcher/$room" ]; then
    (cd "$launcher/include" && ls acc/launcher/"$room"/*.h) | sed 's/.*/#include "&"/' >>"$file"
  fi
  "$cxx" -std=c++20 -E -o /dev/null @"$flags_dir/$room.flags" "$file" 2>"$file.err" ||
    fail "a header of room $room includes what its room cannot reach:"$'\n'"$(<"$file.err")"
done
checked=$((${#rooms[@]} * ${#probe_headers[@]} + ${#rooms[@]}))
if [ "$failures" -ne 0 ]; then
  echo "$failures of $checked checks failed: an include against the rooms' order" >&2
  exit 1
fi
echo "$checked checks: each of ${#rooms[@]} rooms reaches its own and those below it, none above"
