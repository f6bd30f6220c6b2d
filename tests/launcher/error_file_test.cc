#include "agent/error_file.h"

#include <gtest/gtest.h>

#include <fstream>

#include "launcher_harness.h"

namespace acc::launcher {
namespace {

class ErrorFileTest : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    std::ofstream(path_) << text;
    return path_;
  }
  acc::testing::TempDir dir_;
  std::string path_ = dir_.path() + "/error.json";
};

// What torch.distributed.elastic's @record writes.
TEST_F(ErrorFileTest, ReadsPyTorchsRecord) {
  const auto error = read_error_file(write(
      R"({"message": {"message": "ValueError: bad \"lr\"\nsecond line", "extraInfo": )"
      R"({"py_callstack": "Traceback (most recent call last):\n  File \"t.py\"", "timestamp": "1"}}})"));
  ASSERT_TRUE(error);
  EXPECT_EQ(error->message, "ValueError: bad \"lr\"\nsecond line");
  EXPECT_EQ(error->traceback, "Traceback (most recent call last):\n  File \"t.py\"");
}

TEST_F(ErrorFileTest, ReadsAPlainMessage) {
  const auto error = read_error_file(write(R"({"message": "worker gave up \u00e9"})"));
  ASSERT_TRUE(error);
  EXPECT_EQ(error->message, "worker gave up \xc3\xa9");
  EXPECT_EQ(error->traceback, "");
}

TEST_F(ErrorFileTest, NoFileIsNoError) {
  EXPECT_FALSE(read_error_file(path_));
}

TEST_F(ErrorFileTest, ABrokenFileIsNamedNotThrown) {
  for (const std::string text : {"{\"message\": ", "[1, 2]", "{\"other\": 1}"}) {
    const auto error = read_error_file(write(text));
    ASSERT_TRUE(error) << text;
    EXPECT_EQ(error->message, "(unreadable error file " + path_ + ")") << text;
  }
}

TEST_F(ErrorFileTest, ValuesOfTheWrongTypeAreLeftOut) {
  const auto error = read_error_file(write(R"({"message": {"message": 3, "extraInfo": []}})"));
  ASSERT_TRUE(error);
  EXPECT_EQ(error->message, "");
  EXPECT_EQ(error->traceback, "");
}

// The launcher's own error file (under TorchX): the worker's, its code overridden as PyTorch's
// @record does; a plain message is kept as it is; nothing to pass on where the worker wrote none.
TEST_F(ErrorFileTest, PassesTheWorkersFileOnWithItsExitCode) {
  const std::string up = dir_.path() + "/up.json";
  ASSERT_TRUE(pass_on_error_file(
      write(R"({"message": {"message": "E: x", "extraInfo": {"timestamp": "1"}}})"), up, -9));
  EXPECT_EQ(acc::testing::read_text(up),
            R"({"message":{"errorCode":-9,"extraInfo":{"timestamp":"1"},"message":"E: x"}})");
  ASSERT_TRUE(pass_on_error_file(write(R"({"message": "gave up"})"), up, 3));
  EXPECT_EQ(acc::testing::read_text(up), R"({"message":"gave up"})");
  EXPECT_FALSE(pass_on_error_file(dir_.path() + "/none.json", up, 1));
  EXPECT_FALSE(pass_on_error_file(write("not json"), up, 1));
}

}  // namespace
}  // namespace acc::launcher
