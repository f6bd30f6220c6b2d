#pragma once

// Where a launch's own time goes: the launcher marks its steps (the command line parsed, the host
// read, the plan, the run directory, the store joined, the workers started and exited, the
// clean-up, the end) and, with ACC_TIMELINE=1, prints at its end one line of each step's time
// since main():
//
//   acc-launch: timeline (ms since main): parsed 0.18, host 0.25, planned 0.30, ...
//
// Not a debug message: --log_level debug's own lines would land in the steps they measure.
// `bench/launch_overhead/timeline.py` takes the medians over many launches. A mark is a clock
// read and a store (the first 32 marks; later ones are dropped). The launcher's thread only.

namespace acc::launcher::timeline {

// The time now, under `step` (a string literal). The first mark is the origin.
void mark(const char* step);
// The line, on stderr, where ACC_TIMELINE is set and not "0".
void report();

}  // namespace acc::launcher::timeline
