// The job secret through the real binary (docs/rendezvous.md, "Only the job's members"): two
// launchers with the job's secret file meet at a c10d rendezvous and run the job; a launcher
// without the secret, or with another job's, is refused in one line and exits non-zero, and the
// job goes on; a secret file others can read is refused before anything starts; the workers never
// see the file's name.

#include <sys/stat.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "launcher_harness.h"

namespace acc::testing {
namespace {

// A node of a 2-node c10d job at 127.0.0.1:`port`; `hosts`: it serves the rendezvous store (the
// others never do: none of them takes the port before the host).
std::vector<std::string> node(int port, const std::string& id, bool hosts,
                              const std::string& conf = "") {
  return worker(
      {"--nnodes", "2", "--nproc_per_node", "1", "--rdzv_backend", "c10d", "--rdzv_endpoint",
       "127.0.0.1:" + std::to_string(port), "--rdzv_id", id, "--rdzv_conf",
       std::string("join_timeout=60,is_host=") + (hosts ? "1" : "0") + conf},
      {"env"});
}

std::string secret_file(const TempDir& dir, const std::string& name, const std::string& secret) {
  const std::string path = dir.file(name, secret + "\n");
  ::chmod(path.c_str(), 0600);
  return path;
}

TEST(JobSecretTest, OnlyLaunchersWithTheJobsSecretJoinItsRendezvous) {
  TempDir dir;
  const std::string ours = secret_file(dir, "ours", "s3cret of the job");
  const std::string theirs = secret_file(dir, "theirs", "another job's");
  const int port = unused_port();
  // The first node serves the rendezvous store, with the secret, and waits for a second.
  const pid_t host =
      start_launcher(node(port, "secret", true), dir.path(), {{"ACC_JOB_SECRET_FILE", ours}});

  const LaunchRun without = run_launcher(node(port, "secret", false), {}, std::chrono::seconds(60));
  EXPECT_EQ(without.exit_code, 2) << without.err;
  EXPECT_NE(without.err.find("serves a job with a job secret, and this launcher has none"),
            std::string::npos)
      << without.err;
  EXPECT_EQ(lines_of(without.err).size(), 1u) << without.err;

  const LaunchRun wrong = run_launcher(node(port, "secret", false),
                                       {{"ACC_JOB_SECRET_FILE", theirs}}, std::chrono::seconds(60));
  EXPECT_EQ(wrong.exit_code, 2) << wrong.err;
  EXPECT_NE(wrong.err.find("refused this launcher's job secret"), std::string::npos) << wrong.err;

  // The job's second node, its secret given as --rdzv_conf: the job runs, on both nodes.
  const LaunchRun member = run_launcher(node(port, "secret", false, ",job_secret_file=" + ours), {},
                                        std::chrono::seconds(60));
  EXPECT_EQ(member.exit_code, 0) << member.err;
  EXPECT_EQ(wait_launcher(host), 0) << read_text(dir.path() + "/launcher.err");
  EXPECT_NE(member.out.find("WORLD_SIZE=2"), std::string::npos) << member.out;
  EXPECT_EQ(member.out.find("job_secret"), std::string::npos) << "a worker saw it: " << member.out;
  EXPECT_EQ(read_text(dir.path() + "/launcher.out").find("ACC_JOB_SECRET_FILE"), std::string::npos)
      << "a worker was given the secret file's name";
  const std::string served = read_text(dir.path() + "/launcher.err");
  EXPECT_NE(served.find("a wrong job secret"), std::string::npos)
      << "the store's line on the launcher with another job's secret: " << served;
}

TEST(JobSecretTest, ASecretFileOthersCanReadIsRefusedBeforeAnythingStarts) {
  TempDir dir;
  const std::string open = dir.file("open", "s3cret\n");
  ::chmod(open.c_str(), 0644);
  const LaunchRun run =
      run_launcher(node(unused_port(), "open", true), {{"ACC_JOB_SECRET_FILE", open}});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find("chmod 600 " + open), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("s3cret"), std::string::npos) << "the secret was printed: " << run.err;
}

// The dry run says that the stores admit the members alone, and shows neither the secret nor its
// file's content.
TEST(JobSecretTest, TheDryRunSaysTheStoresAdmitTheMembersAloneAndNeverShowsTheSecret) {
  TempDir dir;
  const std::string ours = secret_file(dir, "ours", "s3cret of the job");
  std::vector<std::string> args =
      node(unused_port(), "dry", true, ",job_secret_file=" + ours + ",admit_members_only=true");
  args.insert(args.begin(), "--dry_run");
  const LaunchRun run = run_launcher(args);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("# admission: the stores serve loopback and the addresses that prove the "
                         "job secret alone"),
            std::string::npos)
      << run.out;
  EXPECT_EQ((run.out + run.err).find("s3cret"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace acc::testing
