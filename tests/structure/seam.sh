#!/usr/bin/env bash
# The product code reaches the machine only through its seams, so that the units which do (the
# agent, the stall watch, the stack dumper, `acc-launch stacks`, the status sampler, the store's
# clients, the rendezvous) are tested over fakes: counts the direct calls of one kind in the
# whole tree (launcher, rendezvous, common, runtime, config) outside the seams and fails on any,
# printing each offending line. Usage: seam.sh clock|process SOURCE_ROOT
#   clock:   reading the time and sleeping, which go through acc::Clock (acc/common/clock.h: the
#            rendezvous library's Clock, the agent's Os, Clock::machine()), so that every deadline
#            runs over a fake clock in the tests; a chrono clock under another name
#            (`using SteadyClock = std::chrono::steady_clock`) is caught at its `::now(`;
#   process: kill, wait, fork/exec/spawn/popen/system and "/proc" paths, which go through the
#            launcher's Os (process/os.h), proc::Reader and MachineFiles (host/), and, in the
#            libraries linked into users' programs, acc/common/processes.h.
# The seams themselves: launcher/src/process/, common/src/clock.cc, common/src/processes.cc.
set -euo pipefail
kind=${1:?usage: seam.sh clock|process SOURCE_ROOT}
root=${2:?usage: seam.sh clock|process SOURCE_ROOT}
cd "$root"

case $kind in
  clock)
    # One extended regular expression a line. A `Clock::now(` is a std::chrono clock under another
    # name (the seam's now() is a member, never called that way).
    patterns=(
      '(steady_clock|system_clock|high_resolution_clock)::now'
      '::now[[:space:]]*\('
      'this_thread::sleep_(for|until)'
      '(^|[^.>[:alnum:]_])(sleep|usleep|nanosleep|clock_nanosleep)[[:space:]]*\('
      '\b(clock_gettime|gettimeofday)[[:space:]]*\('
      '(^|[^.>[:alnum:]_])time[[:space:]]*\((nullptr|NULL|0)\)'
    )
    must=('auto t = std::chrono::steady_clock::now();' 'stamp(system_clock::now());'
          'Clock::now() + 1s' 'std::this_thread::sleep_for(50ms);' '::usleep(10);' 'sleep(1);'
          'clock_gettime(CLOCK_MONOTONIC, &ts);' 'std::time(nullptr)'
          'deadline - SteadyClock::now()' 'const auto t0 = Time::now ();')
    must_not=('clock.sleep_for(50ms);' 'clock_->now()' 'os_.now()' 'clock.sleep_until(t);'
              'os_.wall_now()' 'Clock::steady().now()' 'Clock::machine().now()' 'uptime(0)'
              'time_point now() const override {')
    what='direct clock and sleep calls'
    fix='read the time and sleep through acc::Clock (the agent'\''s Os, rendezvous::Clock::steady(), acc::Clock::machine())'
    ;;
  process)
    # A direct call is the name alone or after `::` (not a member: `os_.kill(`, `group_->kill(`,
    # `WorkerGroup::kill(`), with its arguments (a member `kill()` or `clone()` of the launcher's
    # own takes none); a /proc path is a string that starts with it.
    call='(^|[^.>:[:alnum:]_])(::)?'
    args='[[:space:]]*\([[:space:]]*[^)[:space:]]'
    patterns=(
      "${call}(kill|killpg|tgkill|tkill|sigqueue|pidfd_send_signal)${args}"
      "${call}(waitpid|waitid|wait3|wait4)${args}"
      "${call}wait[[:space:]]*\\([[:space:]]*(&|nullptr|NULL|0[[:space:]]*\\))"
      "${call}(fork|vfork)[[:space:]]*\\([[:space:]]*\\)"
      "${call}(clone|clone3|execv|execve|execvp|execvpe|execl|execle|execlp|fexecve)${args}"
      "${call}(posix_spawn|posix_spawnp|popen|system)${args}"
      'std::system[[:space:]]*\('
      '"/proc/'
    )
    must=('::kill(pid, SIGUSR2)' 'if (kill(pid, 0) == 0)' '::killpg(group, SIGTERM);'
          'while (::waitpid(child, &status, 0) < 0)' '::wait4(pid, &status, 0, &usage)'
          'waitid(P_ALL, 0, &info, WEXITED)' 'wait(&status);' 'const pid_t child = ::fork();'
          '::execv(self.c_str(), raw.data());' 'execvp(argv[0], argv)'
          'posix_spawn(&pid, path, &actions, &attr, args, environ)'
          '::popen(command.c_str(), "r")' 'std::system("scontrol show node")' 'system("true");'
          'read_symlink("/proc/self/exe", ec)' 'std::ifstream("/proc/sys/fs/nr_open")'
          'owned_by_me("/proc/" + pid)')
    must_not=('os.signal_process(pid, SIGUSR2)' 'group_->kill();' 'void WorkerGroup::kill() {'
              'os_.wait(fds, deadline);' 'cv.wait(lock);' 'os.start_program(argv, file)'
              'os.exit_status(c.tool)' 'os.run_program(argv)' 'proc.executable()'
              '// what /proc/PID/status shows' 'posix_spawn_file_actions_init(&actions);'
              'file_system("x")' 'skill(3)' '    kill();' 'void kill();'
              'clone() const override {' 'WorkerStack::source = "/proc"')
    what='direct kill, wait, spawn and /proc calls'
    fix='start, signal and wait for processes through Os (process/os.h), read /proc through proc::Reader (process/proc.h) or MachineFiles; in the libraries, acc/common/processes.h'
    ;;
  *) echo "seam.sh: unknown kind '$kind' (clock or process)"; exit 2 ;;
esac
# Where they belong: the launcher's process room (the Os, its real implementation, /proc's
# readers) and the libraries' seam in common/.
allowed=('launcher/src/process/' 'common/src/clock.cc' 'common/src/processes.cc')
scanned=(launcher/src launcher/include rendezvous/src rendezvous/include common/src common/include
         runtime/src runtime/include config/src config/include)

regex=$(IFS='|'; echo "${patterns[*]}")

# The patterns catch what they are meant to, and not a call through the seam.
for line in "${must[@]}"; do
  grep -Eq -- "$regex" <<<"$line" || { echo "seam.sh $kind: pattern misses: $line"; exit 2; }
done
for line in "${must_not[@]}"; do
  ! grep -Eq -- "$regex" <<<"$line" || { echo "seam.sh $kind: pattern flags: $line"; exit 2; }
done

count=0
is_seam() {
  local path
  for path in "${allowed[@]}"; do [[ $1 == "$path"* ]] && return 0; done
  return 1
}
present=()
for dir in "${scanned[@]}"; do [[ -d $dir ]] && present+=("$dir"); done
while IFS= read -r hit; do
  is_seam "$hit" && continue
  echo "${what% calls} call: $hit"
  count=$((count + 1))
done < <(grep -rnE --include='*.cc' --include='*.h' -- "$regex" "${present[@]}" | sort)

echo "$what outside the seams (${present[*]}): $count"
if ((count > 0)); then
  echo "$fix"
  exit 1
fi
