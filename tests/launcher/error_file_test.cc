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
  testing::TempDir dir_;
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

}  // namespace
}  // namespace acc::launcher
