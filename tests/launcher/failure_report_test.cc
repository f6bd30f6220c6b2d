#include "acc/launcher/agent/failure_report.h"

#include <gtest/gtest.h>

namespace acc::launcher {
namespace {

TEST(FailureReportTest, ExitStatusIsTheRootCausesCodeOr128PlusSignal) {
  WorkerOutcome exited;
  exited.exit_code = 3;
  EXPECT_EQ(failure_exit_status(exited), 3);
  WorkerOutcome killed;
  killed.signal = 9;
  EXPECT_EQ(failure_exit_status(killed), 137);
  EXPECT_EQ(describe_exit(killed), "SIGKILL (9)");
}

TEST(FailureReportTest, ReportHasARowPerWorkerAndTheRootCauseDetails) {
  WorkerOutcome root;
  root.rank = 1;
  root.local_rank = 1;
  root.host = "node3";
  root.pid = 4242;
  root.exit_code = 2;
  root.time = "2026-11-22 10:00:00.000";
  root.root_cause = true;
  root.error_file = "/logs/attempt_0/1/error.json";
  root.error_message = "RuntimeError: boom";
  root.stderr_tail = {"last words"};
  WorkerOutcome other;
  other.pid = 4241;
  other.signal = 15;
  other.stopped_by_launcher = true;
  const std::string report = format_failure_report("./train", 2, {other, root});
  EXPECT_NE(report.find("./train FAILED after 2 attempts"), std::string::npos) << report;
  EXPECT_NE(report.find("4242  2 *"), std::string::npos) << report;
  EXPECT_NE(report.find("SIGTERM (15) (stopped)"), std::string::npos) << report;
  EXPECT_NE(report.find("root cause (* above): rank 1 (local rank 1) on node3 exited with 2"),
            std::string::npos);
  EXPECT_NE(report.find("error     : RuntimeError: boom"), std::string::npos);
  EXPECT_NE(report.find("| last words"), std::string::npos);
}

// Without --log_dir the run directory (and the error file in it) is gone by the time the report
// is read: the message was read, the line must not say none was written.
TEST(FailureReportTest, AnErrorFileReadFromARemovedRunDirectoryIsNotCalledUnwritten) {
  WorkerOutcome root;
  root.root_cause = true;
  root.exit_code = 1;
  root.error_message = "std::runtime_error: boom";
  std::string report = format_failure_report("./train", 1, {root});
  EXPECT_EQ(report.find("<none written>"), std::string::npos) << report;
  EXPECT_NE(report.find("error file: <read; removed with the run directory (--log_dir keeps it)>"),
            std::string::npos)
      << report;
  root.error_message.clear();
  report = format_failure_report("./train", 1, {root});
  EXPECT_NE(report.find("error file: <none written>"), std::string::npos) << report;
}

}  // namespace
}  // namespace acc::launcher
