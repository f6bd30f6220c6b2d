// The `acc-launch config` questionnaire: the order of Accelerate's questions, and the real binary
// driven through a pseudo-terminal (menus with arrow and digit keys) and through a pipe.

#include "acc/config/questionnaire.h"

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <deque>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include "acc/common/error.h"

#include "launcher_harness.h"

namespace acc::config {
namespace {

// Answers from a script and records every question.
class ScriptedPrompter : public Prompter {
 public:
  explicit ScriptedPrompter(std::deque<std::string> answers) : answers_(std::move(answers)) {}
  std::string ask(const std::string& prompt) override {
    asked.push_back(prompt);
    return next();
  }
  int choose(const std::string& prompt, const std::vector<std::string>& options,
             int default_index) override {
    asked.push_back(prompt);
    const std::string answer = next();
    if (answer.empty()) return default_index;
    for (size_t i = 0; i < options.size(); ++i)
      if (options[i] == answer) return static_cast<int>(i);
    ADD_FAILURE() << "no option " << answer << " for " << prompt;
    return default_index;
  }
  void say(const std::string& line) override { said.push_back(line); }

  std::vector<std::string> asked;
  std::vector<std::string> said;

 private:
  std::string next() {
    if (answers_.empty()) throw ConfigError("script ended");
    std::string a = answers_.front();
    answers_.pop_front();
    return a;
  }
  std::deque<std::string> answers_;
};

const char* kEnvironment = "In which compute environment are you running?";
const char* kMachineType = "Which type of machine are you using?";
const char* kMachines =
    "How many different machines will you use (use more than 1 for multi-node training)? [1]: ";
const char* kDebug =
    "Should distributed operations be checked while running for errors? This can avoid timeout "
    "issues but will be slower. [yes/NO]: ";
const char* kCpu =
    "Do you want to run your training on CPU only (even if a GPU / Apple Silicon / Ascend NPU "
    "device is available)? [yes/NO]:";
const char* kDynamoQuestion = "Do you wish to optimize your script with torch dynamo?[yes/NO]:";
const char* kDeepSpeed = "Do you want to use DeepSpeed? [yes/NO]: ";
const char* kFsdp = "Do you want to use FullyShardedDataParallel? [yes/NO]: ";
const char* kMegatron = "Do you want to use Megatron-LM ? [yes/NO]: ";
const char* kGpuCount = "How many GPU(s) should be used for distributed training? [1]:";
const char* kGpuIds =
    "What GPU(s) (by id) should be used for training on this machine as a comma-separated list? "
    "[all]:";
const char* kNuma =
    "Would you like to enable numa efficiency? (Currently only supported on NVIDIA hardware). "
    "[yes/NO]: ";
const char* kMixedPrecision = "Do you wish to use mixed precision?";

// reference/accelerate.md §1.2, "Observed question sequences": No distributed, GPU, bf16 asks
// 2, 10, 13, 14, 18, 19, 20.
TEST(QuestionnaireTest, AsksAcceleratesQuestionsForOneGpu) {
  ScriptedPrompter p({"", "", "no", "no", "no", "", "no", "bf16"});
  const ClusterConfig c = run_questionnaire(p, {});
  EXPECT_EQ(p.asked, (std::vector<std::string>{kEnvironment, kMachineType, kCpu, kDynamoQuestion,
                                               kDeepSpeed, kGpuIds, kNuma, kMixedPrecision}));
  EXPECT_EQ(c.distributed_type(), "NO");
  EXPECT_EQ(c.mixed_precision(), "bf16");
  EXPECT_EQ(c.gpu_ids(), "all");
}

// multi-GPU, 1 node, 2 GPUs asks 2, 3, 9, 13, 14, 15, 16, 17, 18, 19, 20.
TEST(QuestionnaireTest, AsksAcceleratesQuestionsForSeveralGpus) {
  ScriptedPrompter p({"", "multi-GPU", "", "no", "no", "no", "no", "no", "2", "", "no", "fp16"});
  const ClusterConfig c = run_questionnaire(p, {});
  EXPECT_EQ(p.asked, (std::vector<std::string>{kEnvironment, kMachineType, kMachines, kDebug,
                                               kDynamoQuestion, kDeepSpeed, kFsdp, kMegatron,
                                               kGpuCount, kGpuIds, kNuma, kMixedPrecision}));
  EXPECT_EQ(c.num_processes(), 2);
  EXPECT_EQ(c.distributed_type(), "MULTI_GPU");
}

TEST(QuestionnaireTest, InvalidAnswersAreAskedAgain) {
  ScriptedPrompter p({"", "multi-GPU", "two", "1", "y", "no", "no", "no", "no", "no", "1", "3",
                      "0,x", "0,1", "0,1,2", "", "no"});
  const ClusterConfig c = run_questionnaire(p, {});
  EXPECT_EQ(c.num_processes(), 3);
  EXPECT_EQ(c.gpu_ids(), "0,1,2");
  EXPECT_EQ(p.said,
            (std::vector<std::string>{
                "Please enter an integer of at least 1.", "Please enter yes or no.",
                "Specified distributed type MULTI_GPU but only using 1 GPU on a single machine. "
                "Please enter at least 2, or select `No distributed training`.",
                "Please enter all, or at least 3 comma-separated ids such as 0,1.",
                "Please enter all, or at least 3 comma-separated ids such as 0,1."}));
}

TEST(QuestionnaireTest, EndOfInputIsAClearError) {
  ScriptedPrompter p({"", "multi-GPU"});
  EXPECT_THROW(run_questionnaire(p, {}), ConfigError);
}

// A child running acc-launch on a pseudo-terminal.
class PtySession {
 public:
  PtySession(const std::vector<std::string>& args, const std::string& hf_home) {
    pid_ = ::forkpty(&fd_, nullptr, nullptr, nullptr);
    if (pid_ == 0) {
      ::setenv("HF_HOME", hf_home.c_str(), 1);
      ::setenv("TERM", "xterm", 1);
      std::vector<std::string> argv = {testing::launcher_binary()};
      argv.insert(argv.end(), args.begin(), args.end());
      std::vector<char*> raw;
      for (auto& a : argv) raw.push_back(a.data());
      raw.push_back(nullptr);
      ::execv(raw[0], raw.data());
      _exit(127);
    }
  }
  ~PtySession() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) ::close(fd_);
  }

  // Waits (up to 10 s, a hang guard) until `text` appears after the last match.
  bool expect(const std::string& text) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (true) {
      const size_t at = transcript_.find(text, seen_);
      if (at != std::string::npos) {
        seen_ = at + text.size();
        return true;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) return false;
      char buffer[4096];
      const ssize_t n = ::read(fd_, buffer, sizeof buffer);
      if (n <= 0) return false;
      transcript_.append(buffer, static_cast<size_t>(n));
    }
  }
  void send(const std::string& keys) {
    ASSERT_EQ(::write(fd_, keys.data(), keys.size()), static_cast<ssize_t>(keys.size()));
  }
  int wait() {
    // Drain what is left so the child never blocks on a full terminal.
    expect("\x01never\x01");
    int status = 0;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  const std::string& transcript() const { return transcript_; }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  bool reaped_ = false;
  std::string transcript_;
  size_t seen_ = 0;
};

const char* kEnter = "\r";
const char* kDown = "\x1b[B";

TEST(QuestionnaireTerminalTest, OneMachineOnCpu) {
  testing::TempDir home;
  const std::string path = home.path() + "/cpu.yaml";
  PtySession s({"config", "--config_file", path}, home.path());
  ASSERT_TRUE(s.expect("In which compute environment are you running?"));
  ASSERT_TRUE(s.expect("AWS (Amazon SageMaker)"));
  s.send(kEnter);
  ASSERT_TRUE(s.expect("TPU"));
  s.send(kEnter);  // No distributed training
  ASSERT_TRUE(s.expect("CPU only"));
  s.send("y\r");  // refused: only yes/no
  ASSERT_TRUE(s.expect("Please enter yes or no."));
  ASSERT_TRUE(s.expect("CPU only"));
  s.send("yes\r");
  ASSERT_TRUE(s.expect("torch dynamo"));
  s.send("no\r");
  ASSERT_TRUE(s.expect("DeepSpeed"));
  s.send("no\r");
  ASSERT_TRUE(s.expect("mixed precision?"));
  ASSERT_TRUE(s.expect("fp8"));
  s.send("2");  // digit key: bf16
  s.send(kEnter);
  ASSERT_TRUE(s.expect("accelerate configuration saved at " + path)) << s.transcript();
  EXPECT_EQ(s.wait(), 0);
  const ClusterConfig c = load_config(path);
  EXPECT_EQ(c.distributed_type(), "NO");
  EXPECT_TRUE(c.use_cpu());
  EXPECT_EQ(c.mixed_precision(), "bf16");
  EXPECT_EQ(c.num_processes(), 1);
  EXPECT_FALSE(c.gpu_ids().has_value());
}

TEST(QuestionnaireTerminalTest, OneMachineSeveralGpusWithArrowKeys) {
  testing::TempDir home;
  const std::string path = home.path() + "/gpus.yaml";
  PtySession s({"config", "--config_file", path}, home.path());
  ASSERT_TRUE(s.expect("AWS (Amazon SageMaker)"));
  s.send(kEnter);
  ASSERT_TRUE(s.expect("TPU"));
  for (int i = 0; i < 4; ++i) s.send(kDown);  // multi-GPU
  s.send(kEnter);
  ASSERT_TRUE(s.expect("How many different machines"));
  s.send(kEnter);  // 1
  ASSERT_TRUE(s.expect("checked while running"));
  s.send("no\r");
  ASSERT_TRUE(s.expect("torch dynamo"));
  s.send("yes\r");
  ASSERT_TRUE(s.expect("tvm"));
  s.send(kEnter);  // inductor, the default
  ASSERT_TRUE(s.expect("customize the defaults"));
  s.send("no\r");
  ASSERT_TRUE(s.expect("DeepSpeed"));
  s.send("no\r");
  ASSERT_TRUE(s.expect("FullyShardedDataParallel"));
  s.send("no\r");
  ASSERT_TRUE(s.expect("Megatron-LM"));
  s.send("no\r");
  ASSERT_TRUE(s.expect("How many GPU(s)"));
  s.send("1\r");
  ASSERT_TRUE(s.expect("only using 1 GPU on a single machine"));
  ASSERT_TRUE(s.expect("How many GPU(s)"));
  s.send("4\r");
  ASSERT_TRUE(s.expect("comma-separated list? [all]:"));
  s.send("0,1\r");
  ASSERT_TRUE(s.expect("at least 4 comma-separated ids"));
  s.send("0,1,2,3\r");
  ASSERT_TRUE(s.expect("numa efficiency"));
  s.send("yes\r");
  ASSERT_TRUE(s.expect("fp8"));
  s.send(kDown);
  s.send(kEnter);  // fp16
  ASSERT_TRUE(s.expect("saved at " + path)) << s.transcript();
  EXPECT_EQ(s.wait(), 0);
  const ClusterConfig c = load_config(path);
  EXPECT_EQ(c.distributed_type(), "MULTI_GPU");
  EXPECT_EQ(c.num_processes(), 4);
  EXPECT_EQ(c.gpu_ids(), "0,1,2,3");
  EXPECT_TRUE(c.enable_cpu_affinity());
  EXPECT_EQ(c.mixed_precision(), "fp16");
  EXPECT_EQ(c.section("dynamo_config").find("dynamo_backend")->text, "INDUCTOR");

  // What the wizard wrote launches: four workers with the settings answered.
  const testing::LaunchRun r =
      testing::run_launcher({"--config_file", path, "--dry_run", "--no_python", "/bin/true"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const testing::DryRun run = testing::parse_dry_run(r.out);
  ASSERT_EQ(run.workers.size(), 4u);
  EXPECT_EQ(run.workers[3].at("CUDA_VISIBLE_DEVICES"), "0,1,2,3");
  EXPECT_EQ(run.workers[3].at("ACCELERATE_DYNAMO_BACKEND"), "INDUCTOR");
  EXPECT_EQ(run.workers[3].at("ACCELERATE_CPU_AFFINITY"), "1");
  EXPECT_EQ(run.workers[3].at("ACCELERATE_MIXED_PRECISION"), "fp16");
}

TEST(QuestionnaireTerminalTest, SeveralMachinesWriteWhatAccelerateWrites) {
  testing::TempDir home;
  PtySession s({"config"}, home.path());  // the default file under $HF_HOME
  ASSERT_TRUE(s.expect("AWS (Amazon SageMaker)"));
  s.send(kEnter);
  ASSERT_TRUE(s.expect("TPU"));
  s.send("4");
  s.send(kEnter);  // multi-GPU by its number
  ASSERT_TRUE(s.expect("How many different machines"));
  s.send("2\r");
  ASSERT_TRUE(s.expect("What is the rank of this machine?"));
  ASSERT_TRUE(s.expect("1"));
  s.send(kDown);
  s.send(kEnter);
  ASSERT_TRUE(s.expect("IP address of the machine that will host the main process? "));
  s.send("10.0.0.1\r");
  ASSERT_TRUE(s.expect("port you will use"));
  s.send("99999\r");
  ASSERT_TRUE(s.expect("Please enter a port between 1 and 65535."));
  s.send("29500\r");
  ASSERT_TRUE(s.expect("same local network"));
  s.send("no\r");
  ASSERT_TRUE(s.expect("rendezvous backend"));
  s.send("c10d\r");
  ASSERT_TRUE(s.expect("checked while running"));
  s.send("\r");
  ASSERT_TRUE(s.expect("torch dynamo"));
  s.send("\r");
  ASSERT_TRUE(s.expect("DeepSpeed"));
  s.send("\r");
  ASSERT_TRUE(s.expect("FullyShardedDataParallel"));
  s.send("\r");
  ASSERT_TRUE(s.expect("Megatron-LM"));
  s.send("\r");
  ASSERT_TRUE(s.expect("How many GPU(s)"));
  s.send("16\r");
  ASSERT_TRUE(s.expect("comma-separated list? [all]:"));
  s.send("0,1,2,3,4,5,6,7\r");
  ASSERT_TRUE(s.expect("numa efficiency"));
  s.send("\r");
  ASSERT_TRUE(s.expect("fp8"));
  s.send(kEnter);
  const std::string path = home.path() + "/accelerate/default_config.yaml";
  ASSERT_TRUE(s.expect("saved at " + path)) << s.transcript();
  EXPECT_EQ(s.wait(), 0);
  // reference/accelerate.md §1.4: the 2-node, not-same-network file Accelerate writes.
  EXPECT_EQ(testing::read_text(path), R"(compute_environment: LOCAL_MACHINE
debug: false
distributed_type: MULTI_GPU
downcast_bf16: 'no'
enable_cpu_affinity: false
gpu_ids: 0,1,2,3,4,5,6,7
machine_rank: 1
main_process_ip: 10.0.0.1
main_process_port: 29500
main_training_function: main
mixed_precision: 'no'
num_machines: 2
num_processes: 16
rdzv_backend: c10d
same_network: false
tpu_env: []
tpu_use_cluster: false
tpu_use_sudo: false
use_cpu: false
)");
}

TEST(QuestionnairePipeTest, AnswersPipedOnStdinWriteTheFile) {
  testing::TempDir home;
  const std::string path = home.path() + "/mpi.yaml";
  // multi-CPU with mpirun: questions 2, 3, 9, 11, 12, 13, 17, 20 (reference/accelerate.md §1.2).
  const testing::LaunchRun r = testing::run_launcher(
      {"config", "--config_file", path}, {{"HF_HOME", home.path()}, {"HOME", "/home/ada"}},
      "0\nmulti-CPU\n1\nno\nyes\n\nno\nseven\n4\nbf16\n");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("Please enter an integer of at least 1."), std::string::npos);
  EXPECT_NE(r.out.find("How many processes should be used for distributed training? [1]:"),
            std::string::npos);
  EXPECT_EQ(testing::read_text(path), R"(compute_environment: LOCAL_MACHINE
debug: false
distributed_type: MULTI_CPU
downcast_bf16: 'no'
enable_cpu_affinity: false
machine_rank: 0
main_training_function: main
mixed_precision: bf16
mpirun_config:
  mpirun_hostfile: /home/ada/hostfile
num_machines: 1
num_processes: 4
rdzv_backend: static
same_network: true
tpu_env: []
tpu_use_cluster: false
tpu_use_sudo: false
use_cpu: true
)");
}

TEST(QuestionnairePipeTest, InputEndingEarlyWritesNothingAndExitsTwo) {
  testing::TempDir home;
  const std::string path = home.path() + "/none.yaml";
  const testing::LaunchRun r =
      testing::run_launcher({"config", "--config_file", path}, {}, "0\nmulti-GPU\n");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "acc-launch: error: the input ended before every question was answered; nothing was "
            "written\n");
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace acc::config

namespace acc::config {
namespace {

TEST(QuestionnaireTest, DeepSpeedQuestionsFillTheSection) {
  ScriptedPrompter p({"", "", "no", "no", "yes", "no", "3", "cpu", "nvme", "/scratch", "4", "yes",
                      "0.5", "yes", "no", "no", "2", "bf16"});
  const ClusterConfig c = run_questionnaire(p, {});
  EXPECT_EQ(p.asked.back(), "Do you wish to use mixed precision?");
  EXPECT_EQ(p.asked[p.asked.size() - 2],
            "How many GPU(s) should be used for distributed training? [1]:");
  EXPECT_EQ(c.distributed_type(), "DEEPSPEED");
  EXPECT_EQ(c.num_processes(), 2);
  EXPECT_FALSE(c.gpu_ids().has_value());  // not asked once DeepSpeed is chosen
  EXPECT_NE(to_yaml(c).find("deepspeed_config:\n"
                            "  gradient_accumulation_steps: 4\n"
                            "  gradient_clipping: 0.5\n"
                            "  offload_optimizer_device: cpu\n"
                            "  offload_param_device: nvme\n"
                            "  offload_param_nvme_path: /scratch\n"
                            "  zero3_init_flag: false\n"
                            "  zero3_save_16bit_model: true\n"
                            "  zero_stage: 3\n"),
            std::string::npos)
      << to_yaml(c);
  // What it writes is a valid file that gives DeepSpeed's variables.
  testing::TempDir dir;
  save_config(c, dir.path() + "/ds.yaml", false);
  const testing::LaunchRun r = testing::run_launcher(
      {"--config_file", dir.path() + "/ds.yaml", "--dry_run", "--no_python", "/bin/true"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto env = testing::parse_dry_run(r.out).workers.at(0);
  EXPECT_EQ(env.at("ACCELERATE_DEEPSPEED_ZERO_STAGE"), "3");
  EXPECT_EQ(env.at("ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE"), "nvme");
  EXPECT_EQ(env.at("ACCELERATE_GRADIENT_CLIPPING"), "0.5");
  EXPECT_EQ(env.at("ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL"), "true");
  EXPECT_EQ(env.at("ACCELERATE_MIXED_PRECISION"), "bf16");
}

TEST(QuestionnaireTest, DeepSpeedJsonFileSkipsMixedPrecision) {
  ScriptedPrompter p({"", "", "no", "no", "yes", "yes", "ds.json", "yes", "no", "2"});
  const ClusterConfig c = run_questionnaire(p, {});
  EXPECT_EQ(p.asked.back(), "How many GPU(s) should be used for distributed training? [1]:");
  EXPECT_FALSE(c.mixed_precision().has_value());
  EXPECT_EQ(c.section("deepspeed_config").find("deepspeed_config_file")->text, "ds.json");
  EXPECT_TRUE(c.section("deepspeed_config").find("zero3_init_flag")->boolean);
}

TEST(QuestionnaireTest, FsdpQuestionsFillTheSection) {
  ScriptedPrompter p({"",
                      "multi-GPU",
                      "",
                      "no",
                      "no",
                      "no",
                      "yes",
                      "1",
                      "SHARD_GRAD_OP",
                      "no",
                      "TRANSFORMER_BASED_WRAP",
                      "no",
                      "LlamaDecoderLayer",
                      "BACKWARD_PRE",
                      "SHARDED_STATE_DICT",
                      "no",
                      "",
                      "no",
                      "no",
                      "yes",
                      "8",
                      "bf16"});
  const ClusterConfig c = run_questionnaire(p, {});
  EXPECT_EQ(c.distributed_type(), "FSDP");
  EXPECT_EQ(c.num_processes(), 8);
  const Value& f = c.section("fsdp_config");
  EXPECT_EQ(f.find("fsdp_version")->integer, 1);
  EXPECT_EQ(f.find("fsdp_reshard_after_forward")->text, "SHARD_GRAD_OP");
  EXPECT_EQ(f.find("fsdp_transformer_layer_cls_to_wrap")->text, "LlamaDecoderLayer");
  EXPECT_FALSE(f.find("fsdp_cpu_ram_efficient_loading")->boolean);
  EXPECT_FALSE(f.find("fsdp_sync_module_states")->boolean);
  EXPECT_TRUE(f.find("fsdp_activation_checkpointing")->boolean);
  EXPECT_TRUE(f.find("fsdp_use_orig_params")->boolean);
  testing::TempDir dir;
  save_config(c, dir.path() + "/fsdp.yaml", false);
  const testing::LaunchRun r = testing::run_launcher(
      {"--config_file", dir.path() + "/fsdp.yaml", "--dry_run", "--no_python", "/bin/true"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto env = testing::parse_dry_run(r.out).workers.at(7);
  EXPECT_EQ(env.at("FSDP_RESHARD_AFTER_FORWARD"), "shard_grad_op");
  EXPECT_EQ(env.at("FSDP_TRANSFORMER_CLS_TO_WRAP"), "LlamaDecoderLayer");
  EXPECT_EQ(env.at("FSDP_SYNC_MODULE_STATES"), "false");
  EXPECT_EQ(env.at("FSDP_ACTIVATION_CHECKPOINTING"), "true");
}

}  // namespace
}  // namespace acc::config

namespace acc::config {
namespace {

TEST(QuestionnaireTest, MegatronQuestionsFillTheSection) {
  ScriptedPrompter p({"", "multi-GPU", "", "no", "no", "no", "no", "yes", "2", "", "2", "4", "no",
                      "", "0.5", "4", "bf16"});
  const ClusterConfig c = run_questionnaire(p, {});
  EXPECT_EQ(c.distributed_type(), "MEGATRON_LM");
  EXPECT_EQ(c.num_processes(), 4);
  const Value& m = c.section("megatron_lm_config");
  EXPECT_EQ(m.find("megatron_lm_tp_degree")->integer, 2);
  EXPECT_TRUE(m.find("megatron_lm_sequence_parallelism")->boolean);
  EXPECT_EQ(m.find("megatron_lm_num_micro_batches")->integer, 4);
  EXPECT_FALSE(m.find("megatron_lm_recompute_activations")->boolean);
  EXPECT_EQ(m.find("megatron_lm_gradient_clipping")->real, 0.5);
  testing::TempDir dir;
  save_config(c, dir.path() + "/m.yaml", false);
  const testing::LaunchRun r = testing::run_launcher(
      {"--config_file", dir.path() + "/m.yaml", "--dry_run", "--no_python", "/bin/true"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto env = testing::parse_dry_run(r.out).workers.at(0);
  EXPECT_EQ(env.at("MEGATRON_LM_TP_DEGREE"), "2");
  EXPECT_EQ(env.at("MEGATRON_LM_SEQUENCE_PARALLELISM"), "True");
  EXPECT_EQ(env.at("MEGATRON_LM_RECOMPUTE_ACTIVATIONS"), "False");
  EXPECT_EQ(env.at("MEGATRON_LM_GRADIENT_CLIPPING"), "0.5");
}

TEST(QuestionnaireTest, Fsdp2AsksForTheParallelismConfig) {
  ScriptedPrompter p({"",    "multi-GPU", "",    "no",  "no",      "no",
                      "yes", "2",         "",    "no",  "NO_WRAP", "SHARDED_STATE_DICT",
                      "no",  "no",        "yes", "2",   "1",       "2",
                      "2",   "alltoall",  "8",   "bf16"});
  const ClusterConfig c = run_questionnaire(p, {});
  EXPECT_EQ(c.distributed_type(), "FSDP");
  const Value& pc = c.section("parallelism_config");
  EXPECT_EQ(pc.find("parallelism_config_dp_replicate_size")->integer, 2);
  EXPECT_EQ(pc.find("parallelism_config_cp_size")->integer, 2);
  EXPECT_EQ(pc.find("parallelism_config_cp_comm_strategy")->text, "alltoall");
  testing::TempDir dir;
  save_config(c, dir.path() + "/p.yaml", false);
  const testing::LaunchRun r = testing::run_launcher(
      {"--config_file", dir.path() + "/p.yaml", "--dry_run", "--no_python", "/bin/true"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto env = testing::parse_dry_run(r.out).workers.at(0);
  EXPECT_EQ(env.at("FSDP_VERSION"), "2");
  EXPECT_EQ(env.at("ACCELERATE_USE_PARALLELISM_CONFIG"), "true");
  EXPECT_EQ(env.at("PARALLELISM_CONFIG_CP_COMM_STRATEGY"), "alltoall");
}

}  // namespace
}  // namespace acc::config
