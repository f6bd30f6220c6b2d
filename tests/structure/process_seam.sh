#!/usr/bin/env bash
# The launcher starts, signals and waits for processes and reads /proc only through its process
# seam (the Os interface, process/os.h, and proc::Reader, process/proc.h), so that the units which
# do (the agent, the stall watch, the stack dumper, `acc-launch stacks`, the status sampler) are
# tested over fakes: counts the direct kill, wait, fork/exec/spawn/popen/system calls and the
# "/proc" paths in launcher/src outside the process room and fails on any, printing each offending
# line. Usage: process_seam.sh SOURCE_ROOT
set -euo pipefail
root=${1:?usage: process_seam.sh SOURCE_ROOT}
cd "$root"

# A direct call is the name alone or after `::` (not a member: `os_.kill(`, `group_->kill(`,
# `WorkerGroup::kill(`), with its arguments (a member `kill()` or `clone()` of the launcher's own
# takes none), one extended regular expression a line; a /proc path is a string that starts with it.
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
# Where they belong: the process room (the Os, its real implementation, and /proc's reader).
allowed=(
  'launcher/src/process/'
)

regex=$(IFS='|'; echo "${patterns[*]}")

# The patterns catch what they are meant to, and not a call through the seam.
self_test() {
  local must=('::kill(pid, SIGUSR2)' 'if (kill(pid, 0) == 0)' '::killpg(group, SIGTERM);'
              'while (::waitpid(child, &status, 0) < 0)' '::wait4(pid, &status, 0, &usage)'
              'waitid(P_ALL, 0, &info, WEXITED)' 'wait(&status);' 'const pid_t child = ::fork();'
              '::execv(self.c_str(), raw.data());' 'execvp(argv[0], argv)'
              'posix_spawn(&pid, path, &actions, &attr, args, environ)'
              '::popen(command.c_str(), "r")' 'std::system("scontrol show node")'
              'system("true");' 'read_symlink("/proc/self/exe", ec)'
              'std::ifstream("/proc/sys/fs/nr_open")' 'owned_by_me("/proc/" + pid)')
  local must_not=('os.signal_process(pid, SIGUSR2)' 'group_->kill();' 'void WorkerGroup::kill() {'
                  'os_.wait(fds, deadline);' 'cv.wait(lock);' 'os.start_program(argv, file)'
                  'os.exit_status(c.tool)' 'os.run_program(argv)' 'proc.executable()'
                  '// what /proc/PID/status shows' 'posix_spawn_file_actions_init(&actions);'
                  'file_system("x")' 'skill(3)' '    kill();' 'void kill();'
                  'clone() const override {' 'WorkerStack::source = "/proc"')
  local line
  for line in "${must[@]}"; do
    grep -Eq -- "$regex" <<<"$line" || { echo "process_seam.sh: pattern misses: $line"; exit 2; }
  done
  for line in "${must_not[@]}"; do
    ! grep -Eq -- "$regex" <<<"$line" || { echo "process_seam.sh: pattern flags: $line"; exit 2; }
  done
}
self_test

count=0
while IFS= read -r hit; do
  path=${hit%%:*}
  for prefix in "${allowed[@]}"; do [[ $path == "$prefix"* ]] && continue 2; done
  echo "direct process or /proc call: $hit"
  count=$((count + 1))
done < <(grep -rnE --include='*.cc' --include='*.h' -- "$regex" launcher/src | sort)

echo "direct kill, wait, spawn and /proc calls in launcher/src outside process/: $count"
if ((count > 0)); then
  echo "start, signal and wait for processes through Os (process/os.h) and read /proc through" \
       "proc::Reader (process/proc.h)"
  exit 1
fi
