#pragma once

// What a library linked into a user's program (libacc, the rendezvous client) asks the machine
// of processes, in one place: the tree's seam for it outside the launcher, whose own reads go
// through launcher/src/process/ (tests/structure/seam.sh allows these two places only). Each
// reads /proc or asks the kernel once; none blocks.

#include <string>
#include <vector>

namespace acc::processes {

// This program's file, its links resolved (/proc/self/exe). Throws SystemError when it cannot
// be read.
std::string own_executable();

// This program's arguments past argv[0] (/proc/self/cmdline); empty when it cannot be read.
std::vector<std::string> own_arguments();

// The threads this process runs (/proc/self/task); 0 when it cannot be read.
int own_thread_count();

// Whether process `pid` exists (signal 0 finds it, or finds it owned by another user).
bool exists(int pid);

}  // namespace acc::processes
