#include "acc/common/strings.h"

#include <gtest/gtest.h>

#include "acc/common/int_ranges.h"

namespace acc {
namespace {

using Strings = std::vector<std::string>;

TEST(StringsTest, SplitKeepsEmptyPartsButNotATrailingOne) {
  EXPECT_EQ(split("a,,b", ','), (Strings{"a", "", "b"}));
  EXPECT_EQ(split("a,", ','), (Strings{"a"}));
  EXPECT_EQ(split(",a", ','), (Strings{"", "a"}));
  EXPECT_EQ(split("", ','), Strings{});
  EXPECT_EQ(split("abc", ','), (Strings{"abc"}));
}

TEST(StringsTest, JoinTrimLowerAffixes) {
  EXPECT_EQ(join(Strings{"a", "b", "c"}, ", "), "a, b, c");
  EXPECT_EQ(join(Strings{}, ","), "");
  EXPECT_EQ(join(std::vector<std::string_view>{"x", "y"}, "|"), "x|y");
  EXPECT_EQ(trim(" \t x y \r\n"), "x y");
  EXPECT_EQ(trim(" \n "), "");
  EXPECT_EQ(to_lower("YeS"), "yes");
  EXPECT_EQ(to_upper("multi_gpu"), "MULTI_GPU");
  EXPECT_TRUE(starts_with("SIGTERM", "SIG"));
  EXPECT_FALSE(starts_with("SI", "SIG"));
  EXPECT_TRUE(ends_with("train.py", ".py"));
  EXPECT_FALSE(ends_with("py", ".py"));
}

TEST(StringsTest, NumbersWithFixedOrNeededDecimals) {
  EXPECT_EQ(fixed(2.345, 1), "2.3");
  EXPECT_EQ(fixed(10, 2), "10.00");
  EXPECT_EQ(decimal(1.5), "1.5");
  EXPECT_EQ(decimal(10), "10");
  EXPECT_EQ(decimal(0.25), "0.25");
  EXPECT_EQ(decimal(2.0004), "2");
  EXPECT_EQ(decimal(-0.0001), "0");
  EXPECT_EQ(decimal(1234.5678), "1234.568");
  EXPECT_EQ(decimal_seconds(std::chrono::milliseconds(1500)), "1.5");
  EXPECT_EQ(decimal_seconds(std::chrono::milliseconds(600000)), "600");
}

TEST(StringsTest, ReplaceAllDoesNotRescanItsReplacement) {
  EXPECT_EQ(replace_all("[${rank}] ${rank}", "${rank}", "0-3"), "[0-3] 0-3");
  EXPECT_EQ(replace_all("aa", "a", "aa"), "aaaa");
  EXPECT_EQ(replace_all("abc", "", "x"), "abc");
}

TEST(StringsTest, ParseIntTakesTheWholeTextOrNothing) {
  EXPECT_EQ(parse_int("42"), 42);
  EXPECT_EQ(parse_int("-5"), -5);
  EXPECT_EQ(parse_int("2147483647"), 2147483647);
  for (const char* bad : {"", " 1", "1 ", "+1", "12x", "0x10", "2147483648", "1.5", "-"})
    EXPECT_FALSE(parse_int(bad)) << bad;
}

TEST(StringsTest, OneLineFlattensAPageAndCutsIt) {
  EXPECT_EQ(one_line("<html>\r\n  <body>bad\tgateway</body>\n</html>\n"),
            "<html> <body>bad gateway</body> </html>");
  EXPECT_EQ(one_line("  \x1b[1mbold\x1b[0m  "), "\\x1b[1mbold\\x1b[0m");
  EXPECT_EQ(one_line("abcdef", 3), "abc...");
  EXPECT_EQ(one_line(""), "");
}

TEST(StringsTest, EscapeControlKeepsAMessageOnOneLine) {
  EXPECT_EQ(escape_control("4\n\x1b[31mred\t\r\x7f"), "4\\n\\x1b[31mred\\t\\r\\x7f");
  EXPECT_EQ(escape_control("plain text, \\ and \xc3\xa9"), "plain text, \\ and \xc3\xa9");
  EXPECT_TRUE(has_control("a\nb"));
  EXPECT_TRUE(has_control(std::string("a\0b", 3)));
  EXPECT_FALSE(has_control("caf\xc3\xa9 [31m"));
}

TEST(IntRangesTest, ParsesAndFormatsRangeLists) {
  EXPECT_EQ(parse_int_ranges("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_int_ranges(" 3, 1,1 "), (std::vector<int>{1, 3}));
  EXPECT_EQ(parse_int_ranges(""), std::vector<int>{});
  for (const char* bad : {"3-1", "a", "-1", "1-", "1--3", "0-99999999"})
    EXPECT_FALSE(parse_int_ranges(bad)) << bad;
  EXPECT_EQ(format_int_ranges({8, 0, 1, 2, 3, 10, 11, 3}), "0-3,8,10-11");
  EXPECT_EQ(format_int_ranges({}), "");
  EXPECT_EQ(format_int_ranges({7}), "7");
}

}  // namespace
}  // namespace acc
