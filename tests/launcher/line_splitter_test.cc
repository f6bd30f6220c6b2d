#include "acc/launcher/output/line_splitter.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace acc::launcher {
namespace {

struct Collect {
  std::vector<std::string> lines;
  LineSplitter splitter{[this](std::string_view line) { lines.emplace_back(line); }};
};

TEST(LineSplitterTest, JoinsPiecesIntoWholeLines) {
  Collect c;
  c.splitter.feed("hel");
  c.splitter.feed("lo\nwor");
  EXPECT_EQ(c.lines, std::vector<std::string>{"hello\n"});
  c.splitter.feed("ld\n");
  EXPECT_EQ(c.lines, (std::vector<std::string>{"hello\n", "world\n"}));
}

TEST(LineSplitterTest, CarriageReturnEndsAProgressBarLine) {
  Collect c;
  c.splitter.feed("10%\r20%\r");
  EXPECT_EQ(c.lines, (std::vector<std::string>{"10%\r", "20%\r"}));
}

TEST(LineSplitterTest, FinishPassesOnALastLineWithoutNewline) {
  Collect c;
  c.splitter.feed("a\nb");
  c.splitter.finish();
  EXPECT_EQ(c.lines, (std::vector<std::string>{"a\n", "b"}));
}

TEST(LineSplitterTest, AnEndlessLineIsPassedOnInBoundedPieces) {
  Collect c;
  c.splitter.feed(std::string(LineSplitter::kMaxLine + 10, 'x'));
  ASSERT_EQ(c.lines.size(), 1u);
  EXPECT_EQ(c.lines[0].size(), LineSplitter::kMaxLine + 10);
  c.splitter.feed("\n");
  EXPECT_EQ(c.lines.size(), 2u);
}

}  // namespace
}  // namespace acc::launcher
