#!/usr/bin/env bash
# The launcher reads the time and sleeps only through its clock seam (rendezvous::Clock, which the
# Os is), so that the agent's tests drive every deadline over a fake clock: counts the direct
# clock and sleep calls in launcher/src outside the process room and fails on any, printing each
# offending line. Usage: clock_seam.sh SOURCE_ROOT
set -euo pipefail
root=${1:?usage: clock_seam.sh SOURCE_ROOT}
cd "$root"

# What counts as a direct call: one extended regular expression a line. A `Clock::now(` means a
# std::chrono clock under another name (the seam's now() is a member, never called that way).
patterns=(
  '(steady_clock|system_clock|high_resolution_clock)::now'
  '\bClock::now[[:space:]]*\('
  'this_thread::sleep_(for|until)'
  '(^|[^.>[:alnum:]_])(sleep|usleep|nanosleep|clock_nanosleep)[[:space:]]*\('
  '\b(clock_gettime|gettimeofday)[[:space:]]*\('
  '(^|[^.>[:alnum:]_])time[[:space:]]*\((nullptr|NULL|0)\)'
)
# Where they are allowed: the process room (the Os and its real implementation).
allowed=(
  'launcher/src/process/'
)
# Files another change is moving onto the seam; their lines are printed as known, not counted.
known=(
  'launcher/src/observe/stack_dump.cc'      # the stack dumper's processes move onto Os
  'launcher/src/commands/stacks_command.cc' # `acc-launch stacks` moves onto Os
  'launcher/src/commands/top_command.cc'    # `acc-launch top`'s client is being rewritten
)

regex=$(IFS='|'; echo "${patterns[*]}")

# The patterns catch what they are meant to, and not a call through the seam.
self_test() {
  local must=('auto t = std::chrono::steady_clock::now();' 'stamp(system_clock::now());'
              'Clock::now() + 1s' 'std::this_thread::sleep_for(50ms);' '::usleep(10);'
              'sleep(1);' 'clock_gettime(CLOCK_MONOTONIC, &ts);' 'std::time(nullptr)')
  local must_not=('clock.sleep_for(50ms);' 'clock_->now()' 'os_.now()' 'clock.sleep_until(t);'
                  'os_.wall_now()' 'Clock::steady().now()' 'uptime(0)')
  local line
  for line in "${must[@]}"; do
    grep -Eq -- "$regex" <<<"$line" || { echo "clock_seam.sh: pattern misses: $line"; exit 2; }
  done
  for line in "${must_not[@]}"; do
    ! grep -Eq -- "$regex" <<<"$line" || { echo "clock_seam.sh: pattern flags: $line"; exit 2; }
  done
}
self_test

in_list() {
  local path=$1; shift
  local prefix
  for prefix in "$@"; do [[ $path == "$prefix"* ]] && return 0; done
  return 1
}

count=0
pending=0
while IFS= read -r hit; do
  path=${hit%%:*}
  in_list "$path" "${allowed[@]}" && continue
  if in_list "$path" "${known[@]}"; then
    echo "known (another change moves it onto the seam): $hit"
    pending=$((pending + 1))
    continue
  fi
  echo "direct clock or sleep call: $hit"
  count=$((count + 1))
done < <(grep -rnE --include='*.cc' --include='*.h' -- "$regex" launcher/src | sort)

echo "direct clock and sleep calls in launcher/src outside process/: $count" \
     "(plus $pending known in files another change moves)"
if ((count > 0)); then
  echo "read the time and sleep through rendezvous::Clock (the agent's Os, or Clock::steady())"
  exit 1
fi
