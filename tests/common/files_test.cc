#include "acc/common/files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

namespace acc {
namespace {

namespace fs = std::filesystem;

class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("acc_files_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static void write(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }

  fs::path dir_;
};

TEST_F(FilesTest, ReadsAWholeFileLargerThanOneReadAndNothingWhereThereIsNone) {
  const std::string text(10000, 'x');
  write(dir_ / "big", text + "\nend");
  EXPECT_EQ(read_file(dir_ / "big"), text + "\nend");
  EXPECT_EQ(read_file(dir_ / "absent"), "");
  EXPECT_NE(read_file("/proc/self/stat").find(std::to_string(::getpid())), std::string::npos);
}

TEST_F(FilesTest, RemovesATreeOfFilesDirectoriesAndLinksButNotWhatTheLinksPointTo) {
  const fs::path tree = dir_ / "run";
  write(tree / "attempt_0" / "0" / "progress", "p");
  write(tree / "attempt_0" / "1" / "progress", "p");
  fs::create_directories(tree / "attempt_0" / "empty");
  write(tree / "python" / "sitecustomize.py", "import os\n");
  write(dir_ / "outside" / "kept", "k");
  fs::create_directory_symlink(dir_ / "outside", tree / "link_to_outside");
  ::mkfifo((tree / "timer_fifo").c_str(), 0600);

  EXPECT_TRUE(remove_tree(tree));
  EXPECT_FALSE(fs::exists(fs::symlink_status(tree)));
  EXPECT_TRUE(fs::exists(dir_ / "outside" / "kept"));
}

TEST_F(FilesTest, RemovingWhatIsNotThereIsNoErrorAndAFileIsRemovedAlone) {
  EXPECT_TRUE(remove_tree(dir_ / "absent"));
  write(dir_ / "file", "f");
  EXPECT_TRUE(remove_tree(dir_ / "file"));
  EXPECT_FALSE(fs::exists(dir_ / "file"));
  EXPECT_TRUE(fs::exists(dir_));
}

TEST_F(FilesTest, ATreeThatCannotBeRemovedIsFalseWithTheErrno) {
  write(dir_ / "file", "f");
  errno = 0;
  EXPECT_FALSE(remove_tree(dir_ / "file" / "below"));
  EXPECT_EQ(errno, ENOTDIR);
  EXPECT_TRUE(fs::exists(dir_ / "file"));
}

TEST_F(FilesTest, WriteFileCreatesOrTruncatesAndSaysWhyItCannot) {
  const std::string path = (dir_ / "hook.py").string();
  ASSERT_EQ(write_file(path, "a longer first text\n"), 0);
  ASSERT_EQ(write_file(path, "second\n"), 0);
  EXPECT_EQ(read_file(path), "second\n");
  EXPECT_EQ(write_file((dir_ / "missing" / "hook.py").string(), "x"), ENOENT);
}

}  // namespace
}  // namespace acc
