// The floor of any launcher on this machine: starts N copies of a program with posix_spawn and
// waits for them, and nothing else (no plan, no store, no output handling). bench.py times it
// beside acc-launch and torchrun, so the start-up ratio can be read against the best any launcher
// could do here.
//
// Usage: spawn_floor N PROGRAM
#include <spawn.h>
#include <sys/wait.h>
#include <cstdio>
#include <cstdlib>

extern char** environ;  // NOLINT: POSIX

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: spawn_floor N PROGRAM\n");
    return 2;
  }
  const int n = atoi(argv[1]);
  char* child_argv[] = {argv[2], nullptr};
  for (int i = 0; i < n; ++i) {
    pid_t pid;
    if (posix_spawn(&pid, argv[2], nullptr, nullptr, child_argv, environ) != 0) {
      perror("posix_spawn");
      return 1;
    }
  }
  int failed = 0;
  for (int status; wait(&status) > 0;) failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  return failed;
}
