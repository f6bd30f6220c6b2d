#pragma once

// One worker's progress, shared with its launcher through a small file that the launcher creates
// in the worker's directory and names in ACC_PROGRESS_FILE. The worker writes it (libacc's
// Accelerator through ProgressFileWriter, a Python worker through the launcher's Python hook);
// the launcher only reads it (ProgressFileReader), without a system call per look.
//
// It holds counters (beats, collectives started and completed, the time of the last progress),
// the section the program has open with its deadline, and a ring of the last collective and
// point-to-point calls. This is the one trace format of acc-launch: the stall watch, the
// straggler report and the stuck-collective match all read it. Fixed layout, little-endian, every
// field naturally aligned; the Python writer mirrors it byte for byte:
//
//   header, 256 bytes                  record, 128 bytes (ring slot n % capacity)
//   0    char[8]  magic "ACCPROG1"     0    u64      seq: its number within its group (1, 2..)
//   8    u32      version (1)          8    i64      start_ns
//   12   u32      capacity (records)   16   i64      end_ns (0 while in flight)
//   16   i64      writer pid           24   u64      numel (elements over all its tensors)
//   24   u64      beats                32   i32      group size (ranks)
//   32   u64      records started      36   i32      peer rank (send/recv), else -1
//   40   u64      records completed    40   char[24] group name ("default", ...)
//   48   i64      last_progress_ns     64   char[16] op ("all_reduce", "send", "barrier", ...)
//   56   i64      section_started_ns   80   char[8]  dtype ("float32", ...)
//   64   i64      section_deadline_ns  88   char[40] where: the caller's "file.py:123"
//   72   i64      in_collective_ns (sum over completed records of end_ns - start_ns)
//   80   char[48] section name (empty: no section open)
//   128  u64      step: the program's own step count (0: it gives none; the beats stand for it)
//   136  u64      total_steps: the steps the run will make (0: unknown)
//   144  (reserved, zero)
//
// step and total_steps came after version 1's first writers, in its reserved words: a writer
// that does not know them leaves them zero, which reads as "not given". A program gives them with
// its beat (Writer::beat(step, total)); the launcher's Kubeflow Trainer progress
// (launcher/src/status/kubeflow_progress.h) turns them into a percentage and a time remaining.
//
// Times are CLOCK_MONOTONIC nanoseconds (std::chrono::steady_clock, Python's
// time.monotonic_ns()), comparable between the processes of one machine only. Strings are
// NUL-padded and cut to their field. A writer fills a record, then publishes it by adding 1 to
// `records started`; it sets end_ns, then adds 1 to `records completed` and updates
// last_progress_ns and in_collective_ns. A reader that races a writer may see one torn record;
// the counters are single aligned words.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace acc::progress_file {

inline constexpr char kEnvVar[] = "ACC_PROGRESS_FILE";
inline constexpr std::uint32_t kVersion = 1;
inline constexpr std::uint32_t kCapacity = 512;
inline constexpr std::size_t kHeaderSize = 256;
inline constexpr std::size_t kRecordSize = 128;
inline constexpr std::size_t kFileSize = kHeaderSize + kCapacity * kRecordSize;

struct Header {
  char magic[8];
  std::uint32_t version;
  std::uint32_t capacity;
  std::int64_t writer_pid;
  std::uint64_t beats;
  std::uint64_t started;
  std::uint64_t completed;
  std::int64_t last_progress_ns;
  std::int64_t section_started_ns;
  std::int64_t section_deadline_ns;
  std::int64_t in_collective_ns;
  char section[48];
  std::uint64_t step;
  std::uint64_t total_steps;
  char reserved[112];
};
static_assert(sizeof(Header) == kHeaderSize);
static_assert(offsetof(Header, step) == 128 && offsetof(Header, total_steps) == 136);

struct Record {
  std::uint64_t seq;
  std::int64_t start_ns;
  std::int64_t end_ns;
  std::uint64_t numel;
  std::int32_t group_size;
  std::int32_t peer;
  char group[24];
  char op[16];
  char dtype[8];
  char where[40];
};
static_assert(sizeof(Record) == kRecordSize);

// Now on the clock the file's times use.
std::int64_t now_ns();

// Creates (or truncates) the file at `path`, sized and with its header written, for a worker
// about to start. Throws acc::SystemError naming the path.
void create(const std::string& path);

// A collective or point-to-point call as the reader sees it.
struct Call {
  std::uint64_t seq = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;  // 0: still in it
  std::uint64_t numel = 0;
  int group_size = 0;
  int peer = -1;
  std::string group, op, dtype, where;
  bool in_flight() const { return end_ns == 0; }
};

// One look at a worker's file.
struct Snapshot {
  std::int64_t writer_pid = 0;  // 0: nothing wrote yet (not Python with the hook, not libacc)
  std::uint64_t beats = 0;
  std::uint64_t started = 0;
  std::uint64_t completed = 0;
  std::int64_t last_progress_ns = 0;
  std::int64_t in_collective_ns = 0;
  std::string section;  // empty: none open
  std::int64_t section_started_ns = 0;
  std::int64_t section_deadline_ns = 0;  // 0: no deadline
  std::uint64_t step = 0;                // the program's step count; 0: not given
  std::uint64_t total_steps = 0;         // 0: unknown
  std::vector<Call> calls;               // the ring's records, oldest first (at most kCapacity)
};

// The launcher's side: maps the file read-only once; each snapshot() is memory reads only.
class Reader {
 public:
  // Throws acc::SystemError when the file cannot be opened or is not a progress file.
  explicit Reader(const std::string& path);
  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;
  // The counters and the newest `newest_calls` calls of the ring; 0: counters only, the cheap
  // look of a stall-watch tick.
  Snapshot snapshot(std::size_t newest_calls = kCapacity) const;

 private:
  const unsigned char* base_ = nullptr;
};

// A Reader of each of `paths`, in order; null where one cannot be opened (a worker that has not
// made its file, or not a progress file).
std::vector<std::unique_ptr<Reader>> open_readers(const std::vector<std::string>& paths);

// The worker's side (libacc). Every method is a few memory writes; none throws after
// construction.
class Writer {
 public:
  // Opens the file the launcher created. Throws acc::SystemError when it cannot.
  explicit Writer(const std::string& path);
  // ACC_PROGRESS_FILE's file, or null when that is unset or cannot be opened (not under
  // acc-launch).
  static std::unique_ptr<Writer> from_environment();
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // A sign of life that is not a collective (a step, a user's beat).
  void beat();
  // A beat that also says where the run is: `step` steps done of `total` (0: unknown). Writes
  // total_steps, then step, then beats.
  void beat(std::uint64_t step, std::uint64_t total);
  // A call begins; returns its slot for end(). `seq` is the call's number within `group`.
  std::uint64_t begin(const std::string& group, std::uint64_t seq, const std::string& op,
                      std::uint64_t numel, const std::string& dtype, int group_size, int peer,
                      const std::string& where);
  // The call that begin() returned `slot` for has completed.
  void end(std::uint64_t slot);
  // Opens a named section that should end within `deadline_ns` nanoseconds (0: no deadline);
  // close_section() ends it. One section at a time; opening another replaces it.
  void open_section(const std::string& name, std::int64_t deadline_ns);
  void close_section();

 private:
  unsigned char* base_ = nullptr;
};

}  // namespace acc::progress_file
