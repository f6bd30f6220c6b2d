#include "acc/config/cluster_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "acc/common/error.h"
#include "launcher_harness.h"

namespace acc::config {
namespace {

using testing::TempDir;

TEST(ClusterConfigTest, MissingKeysTakeAccelerateDefaults) {
  const ClusterConfig c = parse_config("distributed_type: MULTI_GPU\nnum_processes: 2\n", "c.yaml");
  EXPECT_EQ(c.compute_environment(), "LOCAL_MACHINE");
  EXPECT_EQ(c.distributed_type(), "MULTI_GPU");
  EXPECT_EQ(c.num_processes(), 2);
  EXPECT_EQ(c.num_machines(), 1);
  EXPECT_EQ(c.machine_rank(), 0);
  EXPECT_FALSE(c.mixed_precision().has_value());
  EXPECT_FALSE(c.gpu_ids().has_value());
  EXPECT_FALSE(c.main_process_ip().has_value());
  EXPECT_FALSE(c.main_process_port().has_value());
  EXPECT_EQ(c.rdzv_backend(), "static");
  EXPECT_FALSE(c.same_network());
  EXPECT_FALSE(c.use_cpu());
  EXPECT_FALSE(c.debug());
  EXPECT_FALSE(c.enable_cpu_affinity());
  EXPECT_TRUE(c.section("fsdp_config").entries.empty());
  EXPECT_TRUE(c.warnings().empty());
}

TEST(ClusterConfigTest, ReadsEveryTopLevelKey) {
  const ClusterConfig c = parse_config(R"(compute_environment: LOCAL_MACHINE
distributed_type: MULTI_GPU
mixed_precision: bf16
use_cpu: false
debug: true
num_processes: 8
machine_rank: 1
num_machines: 2
gpu_ids: 0,1,2,3
main_process_ip: 10.0.0.1
main_process_port: 29555
rdzv_backend: c10d
same_network: true
main_training_function: main
enable_cpu_affinity: true
fp8_config: {backend: TE}
deepspeed_config: {}
fsdp_config: {}
parallelism_config: {}
megatron_lm_config: {}
mpirun_config: {}
downcast_bf16: 'no'
tpu_name: null
tpu_zone: null
tpu_use_cluster: false
tpu_use_sudo: false
command_file: null
commands: null
tpu_vm: null
tpu_env: []
dynamo_config: {dynamo_backend: INDUCTOR}
)",
                                       "all.yaml");
  EXPECT_EQ(c.mixed_precision().value(), "bf16");
  EXPECT_TRUE(c.debug());
  EXPECT_EQ(c.num_processes(), 8);
  EXPECT_EQ(c.machine_rank(), 1);
  EXPECT_EQ(c.num_machines(), 2);
  EXPECT_EQ(c.gpu_ids().value(), "0,1,2,3");
  EXPECT_EQ(c.main_process_ip().value(), "10.0.0.1");
  EXPECT_EQ(c.main_process_port().value(), 29555);
  EXPECT_EQ(c.rdzv_backend(), "c10d");
  EXPECT_TRUE(c.same_network());
  EXPECT_TRUE(c.enable_cpu_affinity());
  EXPECT_EQ(c.section("fp8_config").find("backend")->text, "TE");
  EXPECT_EQ(c.section("dynamo_config").find("dynamo_backend")->text, "INDUCTOR");
  // The interactive flow's string 'no' for a boolean key is read as false.
  EXPECT_EQ(c.root().find("downcast_bf16")->kind, Value::Kind::kBool);
  EXPECT_TRUE(c.warnings().empty());
}

TEST(ClusterConfigTest, UnquotedNoMeansWhatTheUserMeant) {
  const ClusterConfig c = parse_config("distributed_type: NO\nmixed_precision: no\n", "c.yaml");
  EXPECT_EQ(c.distributed_type(), "NO");
  EXPECT_EQ(c.mixed_precision().value(), "no");
  EXPECT_EQ(c.num_processes(), 1);  // process_config(): NO without num_processes is one process
}

TEST(ClusterConfigTest, MixedPrecisionIsReadInAnyCase) {
  EXPECT_EQ(
      parse_config("distributed_type: NO\nmixed_precision: BF16\n", "c.yaml").mixed_precision(),
      "bf16");
}

TEST(ClusterConfigTest, LegacyFp16BecomesMixedPrecision) {
  const ClusterConfig c = parse_config("distributed_type: NO\nfp16: true\n", "c.yaml");
  EXPECT_EQ(c.mixed_precision().value(), "fp16");
  EXPECT_EQ(c.root().find("fp16"), nullptr);
  EXPECT_FALSE(parse_config("distributed_type: NO\nfp16: false\n", "c.yaml").mixed_precision());
}

TEST(ClusterConfigTest, LegacyDynamoBackendBecomesDynamoConfig) {
  const ClusterConfig c =
      parse_config("distributed_type: NO\ndynamo_backend: INDUCTOR\n", "c.yaml");
  EXPECT_EQ(c.section("dynamo_config").find("dynamo_backend")->text, "INDUCTOR");
  EXPECT_EQ(c.root().find("dynamo_backend"), nullptr);
  const ClusterConfig off = parse_config("distributed_type: NO\ndynamo_backend: 'NO'\n", "c.yaml");
  EXPECT_TRUE(off.section("dynamo_config").entries.empty());
}

TEST(ClusterConfigTest, ReadsJsonInAYamlFile) {
  const ClusterConfig c = parse_config(
      "{\n  \"distributed_type\": \"MULTI_GPU\",\n  \"num_processes\": 4,\n  \"use_cpu\": false,\n"
      "  \"mixed_precision\": \"bf16\"\n}\n",
      "default_config.yaml");
  EXPECT_EQ(c.distributed_type(), "MULTI_GPU");
  EXPECT_EQ(c.num_processes(), 4);
  EXPECT_EQ(c.mixed_precision().value(), "bf16");
}

TEST(ClusterConfigTest, ASingleUnquotedGpuIdIsAString) {
  // Accelerate crashes on `gpu_ids: 0` ('int' object has no attribute 'split').
  const ClusterConfig c = parse_config("distributed_type: NO\ngpu_ids: 0\n", "c.yaml");
  EXPECT_EQ(c.gpu_ids().value(), "0");
}

TEST(ClusterConfigTest, DuplicateKeysKeepTheLastAndWarn) {
  const ClusterConfig c =
      parse_config("distributed_type: NO\ndebug: false\ndebug: true\n", "d.yaml");
  EXPECT_TRUE(c.debug());
  ASSERT_EQ(c.warnings().size(), 1u);
  EXPECT_EQ(c.warnings()[0],
            "d.yaml:3:1: debug: duplicate key; the last value is used (as PyYAML does); remove the "
            "other");
}

TEST(ClusterConfigTest, UnknownNestedKeyIsAWarningWithTheNearestKey) {
  const ClusterConfig c = parse_config(
      "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_backward_prefetch_policy: "
      "BACKWARD_PRE\n",
      "f.yaml");
  ASSERT_EQ(c.warnings().size(), 1u);
  EXPECT_EQ(c.warnings()[0],
            "f.yaml:4:3: fsdp_config.fsdp_backward_prefetch_policy: unknown key, ignored "
            "(Accelerate ignores it too); did you mean fsdp_backward_prefetch?");
}

// The file `accelerate config` wrote for "multi-GPU, 1 node, 2 GPUs, fp16", byte for byte
// (reference/accelerate.md §1.4): reading and writing it back gives the same bytes.
const char* kAccelerateWritten = R"(compute_environment: LOCAL_MACHINE
debug: false
distributed_type: MULTI_GPU
downcast_bf16: 'no'
enable_cpu_affinity: false
gpu_ids: all
machine_rank: 0
main_training_function: main
mixed_precision: fp16
num_machines: 1
num_processes: 2
rdzv_backend: static
same_network: true
tpu_env: []
tpu_use_cluster: false
tpu_use_sudo: false
use_cpu: false
)";

TEST(ClusterConfigTest, WritesYamlAsAccelerateDoes) {
  ClusterConfig c = parse_config(kAccelerateWritten, "a.yaml");
  // downcast_bf16 was read as the boolean it is; Accelerate's wizard writes the string 'no'.
  c.set("downcast_bf16", Value::of_string("no"));
  EXPECT_EQ(to_yaml(c), kAccelerateWritten);
}

TEST(ClusterConfigTest, YamlRoundTripKeepsEveryValue) {
  TempDir dir;
  const std::string text = R"(distributed_type: MULTI_GPU
num_processes: 16
num_machines: 2
machine_rank: 1
main_process_ip: 10.0.0.1
main_process_port: 29500
gpu_ids: 0,1,2,3,4,5,6,7
mixed_precision: 'no'
rdzv_backend: c10d
same_network: false
dynamo_config:
  dynamo_backend: INDUCTOR
  dynamo_mode: reduce-overhead
  dynamo_use_fullgraph: true
fsdp_config: {}
)";
  const ClusterConfig first = parse_config(text, "r.yaml");
  const std::string path = dir.path() + "/written.yaml";
  save_config(first, path, false);
  const std::string written = testing::read_text(path);
  EXPECT_EQ(written.find("fsdp_config"), std::string::npos);  // empty sections are not written
  EXPECT_NE(written.find("mixed_precision: 'no'\n"), std::string::npos);
  const ClusterConfig second = load_config(path);
  EXPECT_EQ(to_yaml(second), written);
  EXPECT_EQ(second.num_processes(), 16);
  EXPECT_EQ(second.main_process_ip().value(), "10.0.0.1");
  EXPECT_EQ(second.gpu_ids().value(), "0,1,2,3,4,5,6,7");
  EXPECT_EQ(second.mixed_precision().value(), "no");
  EXPECT_EQ(second.section("dynamo_config").find("dynamo_use_fullgraph")->boolean, true);
}

// Keys and values with a newline, a NUL, a tab, quotes, a backslash or a trailing colon are
// written so that they read back the same (found by tests/fuzz/config_yaml_fuzz.cc: a key with a
// newline was written bare, and the file written could not be read).
TEST(ClusterConfigTest, YamlRoundTripKeepsKeysAndValuesWithControlCharacters) {
  const ClusterConfig first = parse_config(
      "distributed_type: FSDP\nfsdp_config:\n"
      "  \"fsdp_key\\nwith a newline\": \"tab\\there, NUL\\0 'q' \\\"dq\\\" \\\\\"\n"
      "  'ends with:': 'a: b'\n",
      "c.yaml");
  const std::string written = to_yaml(first);
  const ClusterConfig second = parse_config(written, "written.yaml");
  EXPECT_EQ(to_yaml(second), written);
  const auto& section = second.section("fsdp_config");
  ASSERT_NE(section.find("fsdp_key\nwith a newline"), nullptr) << written;
  EXPECT_EQ(section.find("fsdp_key\nwith a newline")->text,
            std::string("tab\there, NUL") + '\0' + " 'q' \"dq\" \\")
      << written;
  ASSERT_NE(section.find("ends with:"), nullptr) << written;
  EXPECT_EQ(section.find("ends with:")->text, "a: b");
}

// Strings that YAML's grammar needs quoted (a colon and a space, a leading * or &, a # after a
// space, an empty string, spaces at the ends) and strings PyYAML would read as another type
// (no, 1, null, 1.5) are written so that the reader gives back the same strings.
TEST(ClusterConfigTest, YamlRoundTripKeepsStringsThatNeedQuotes) {
  const std::vector<std::string> strings = {
      "a: b",  "*alias",   "&anchor",    "",     " padded ", "x #y",  "- item", "[list]",
      "{map}", "'single'", "\"double\"", "%tag", "@at",      "ends:", "!tag",   "? key",
      "no",    "1",        "null",       "1.5",  "~",        "all"};
  ClusterConfig first = parse_config("distributed_type: FSDP\n", "q.yaml");
  Value list;
  list.kind = Value::Kind::kList;
  for (const std::string& text : strings) list.items.push_back(Value::of_string(text));
  first.set("tpu_env", list);
  Value section = Value::map();
  section.set("key: with a colon", Value::of_string("*"));
  first.set("fsdp_config", section);
  const std::string written = to_yaml(first);
  EXPECT_NE(written.find("  - 'a: b'\n  - '*alias'\n  - '&anchor'\n  - ''\n"), std::string::npos)
      << written;
  EXPECT_NE(written.find("  'key: with a colon': '*'\n"), std::string::npos) << written;
  const ClusterConfig second = parse_config(written, "written.yaml");
  EXPECT_EQ(to_yaml(second), written);
  const Value* read = second.root().find("tpu_env");
  ASSERT_NE(read, nullptr) << written;
  ASSERT_EQ(read->items.size(), strings.size()) << written;
  for (size_t i = 0; i < strings.size(); ++i) {
    EXPECT_EQ(read->items[i].kind, Value::Kind::kString) << strings[i];
    EXPECT_EQ(read->items[i].text, strings[i]);
  }
  ASSERT_NE(second.section("fsdp_config").find("key: with a colon"), nullptr) << written;
  EXPECT_EQ(second.section("fsdp_config").find("key: with a colon")->text, "*");
}

// Floats are written as PyYAML writes them, so that they read back as floats (YAML 1.1 needs a
// dot in a float: Python's repr, 1e-05 or inf, would read back as a string).
TEST(ClusterConfigTest, YamlRoundTripKeepsFloatsAsFloats) {
  const ClusterConfig first = parse_config(
      "distributed_type: DEEPSPEED\ndeepspeed_config:\n  gradient_clipping: 1.0e-05\n"
      "  x_big: 1.0e+16\n  x_half: 0.5\n  x_inf: .inf\n  x_minus_inf: -.inf\n  x_nan: .nan\n",
      "f.yaml");
  const std::string written = to_yaml(first);
  EXPECT_NE(written.find("  gradient_clipping: 1.0e-05\n  x_big: 1.0e+16\n  x_half: 0.5\n"
                         "  x_inf: .inf\n  x_minus_inf: -.inf\n  x_nan: .nan\n"),
            std::string::npos)
      << written;
  const ClusterConfig second = parse_config(written, "written.yaml");
  const Value& section = second.section("deepspeed_config");
  for (const char* key : {"gradient_clipping", "x_big", "x_half", "x_inf", "x_minus_inf", "x_nan"})
    ASSERT_EQ(section.find(key) ? section.find(key)->kind : Value::Kind::kNull, Value::Kind::kFloat)
        << key << "\n"
        << written;
  EXPECT_EQ(section.find("gradient_clipping")->real, 1e-5);
  EXPECT_EQ(section.find("x_big")->real, 1e16);
  EXPECT_EQ(section.find("x_minus_inf")->real, -HUGE_VAL);
}

// A key that is 1024 characters or more once escaped is written as an explicit key ("? KEY"):
// YAML allows an inline key no longer (found by tests/fuzz/config_yaml_fuzz.cc).
TEST(ClusterConfigTest, YamlRoundTripKeepsAKeyLongerThanYamlAllowsInline) {
  const std::string key = "fsdp_" + std::string(300, '\x17');
  std::string escaped;
  for (char c : key) escaped += c == '\x17' ? std::string("\\x17") : std::string(1, c);
  const ClusterConfig first = parse_config(
      "distributed_type: FSDP\nfsdp_config:\n  ? \"" + escaped + "\"\n  : 3\n  after: 1\n",
      "c.yaml");
  const std::string written = to_yaml(first);
  EXPECT_NE(written.find("  ? \"fsdp_"), std::string::npos) << written;
  const ClusterConfig second = parse_config(written, "written.yaml");
  EXPECT_EQ(to_yaml(second), written);
  ASSERT_NE(second.section("fsdp_config").find(key), nullptr) << written;
  EXPECT_EQ(second.section("fsdp_config").find(key)->text, "3");
  EXPECT_NE(second.section("fsdp_config").find("after"), nullptr);
}

TEST(ClusterConfigTest, JsonRoundTripKeepsEveryValue) {
  TempDir dir;
  const ClusterConfig first = parse_config(
      "distributed_type: DEEPSPEED\nnum_processes: 2\nmixed_precision: fp16\ndeepspeed_config:\n"
      "  zero_stage: 3\n  gradient_clipping: 1.0\n  offload_param_device: cpu\n",
      "j.yaml");
  const std::string path = dir.path() + "/c.json";
  save_config(first, path, false);
  const std::string written = testing::read_text(path);
  EXPECT_EQ(written.substr(0, 4), "{\n  ");
  EXPECT_NE(written.find("\"gradient_clipping\": 1.0"), std::string::npos);
  const ClusterConfig second = load_config(path);
  EXPECT_EQ(to_json(second), written);
  EXPECT_EQ(second.section("deepspeed_config").find("zero_stage")->integer, 3);
  EXPECT_EQ(second.section("deepspeed_config").find("gradient_clipping")->kind,
            Value::Kind::kFloat);
}

// accelerate writes JSON with json.dumps(indent=2, sort_keys=True): Python reading our file and
// writing it back that way gives the same bytes, escapes and numbers included.
TEST(ClusterConfigTest, JsonIsWrittenAsPythonsJsonDumpsWritesIt) {
  TempDir dir;
  const ClusterConfig config = parse_config(
      "distributed_type: MULTI_GPU\nnum_processes: 2\nmain_process_ip: \"h\\u00f6st\\t\\x01\"\n"
      "deepspeed_config:\n  gradient_clipping: 1.0e-05\n  zero_stage: 3\n"
      "  deepspeed_config_file: \"say \\\"hi\\\"\"\ngpu_ids: all\n",
      "p.yaml");
  const std::string path = dir.path() + "/c.json";
  save_config(config, path, false);
  const std::string command =
      "python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1])), indent=2, "
      "sort_keys=True))' " +
      path;
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string python;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) python.append(buffer, n);
  ASSERT_EQ(::pclose(pipe), 0) << python;
  EXPECT_EQ(testing::read_text(path), python);
  EXPECT_NE(python.find("\\u00f6"), std::string::npos) << python;
}

TEST(ClusterConfigTest, SaveCreatesTheParentDirectoryOnlyWhenAsked) {
  TempDir dir;
  const ClusterConfig c = parse_config("distributed_type: NO\n", "c.yaml");
  EXPECT_THROW(save_config(c, dir.path() + "/a/b/c.yaml", false), ConfigError);
  save_config(c, dir.path() + "/a/b/c.yaml", true);
  EXPECT_EQ(load_config(dir.path() + "/a/b/c.yaml").distributed_type(), "NO");
}

}  // namespace
}  // namespace acc::config
