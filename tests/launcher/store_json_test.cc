// The JSON the launchers exchange through node 0's store (nodes/store_json.h): a value comes back
// whole, and anything that is not exactly what the writer wrote comes back as nothing, never with
// a field read as zero.

#include "nodes/store_json.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "json_fields.h"

namespace acc::launcher {
namespace {

constexpr StoreFormat kSampleFormat{"acc-sample", 3};

struct Sample {
  int count = 0;
  std::uint64_t total = 0;
  double seconds = 0;
  std::string name;
  bool on = false;
  std::vector<int> list;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Sample, count, total, seconds, name, on, list)

Sample sample() {
  Sample s;
  s.count = -7;
  s.total = 18'000'000'000'000'000'000u;
  s.seconds = 0.1;
  s.name = "a \"quoted\"\tname\nover two lines, ünïcode ✓";
  s.on = true;
  s.list = {1, -2, 3};
  return s;
}

std::optional<Sample> read(const std::string& text) {
  return from_store_json<Sample>(text, kSampleFormat);
}

// The sample's text with `field` set to `value`, or without it.
std::string with(const std::string& field, const nlohmann::json& value) {
  return with_field(to_store_json(sample(), kSampleFormat), "/" + field, value);
}

std::string without(const std::string& field) {
  return without_field(to_store_json(sample(), kSampleFormat), "/" + field);
}

TEST(StoreJsonTest, AValueComesBackWholeFromOneTaggedLine) {
  const std::string text = to_store_json(sample(), kSampleFormat);
  EXPECT_EQ(text.find('\n'), std::string::npos);
  const nlohmann::json object = nlohmann::json::parse(text);
  EXPECT_EQ(object.at("format"), "acc-sample");
  EXPECT_EQ(object.at("version"), 3);
  const std::optional<Sample> back = read(text);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->count, -7);
  EXPECT_EQ(back->total, 18'000'000'000'000'000'000u);
  EXPECT_EQ(back->seconds, 0.1);  // exactly: doubles are written to round trip
  EXPECT_EQ(back->name, sample().name);
  EXPECT_TRUE(back->on);
  EXPECT_EQ(back->list, (std::vector<int>{1, -2, 3}));
}

TEST(StoreJsonTest, AnotherFormatOrVersionReadsAsNothing) {
  EXPECT_FALSE(read(with("version", 2)));
  EXPECT_FALSE(read(with("version", 4)));
  EXPECT_FALSE(read(with("version", "3")));
  EXPECT_FALSE(read(with("format", "acc-other")));
  EXPECT_FALSE(read(without("format")));
  EXPECT_FALSE(read(without("version")));
  EXPECT_FALSE(from_store_json<Sample>(to_store_json(sample(), kSampleFormat), {"acc-sample", 4}));
}

TEST(StoreJsonTest, TextThatIsNotOneWholeObjectReadsAsNothing) {
  const std::string text = to_store_json(sample(), kSampleFormat);
  // Cut anywhere, as a torn value would be.
  for (size_t size = 0; size < text.size(); ++size)
    EXPECT_FALSE(read(text.substr(0, size))) << text.substr(0, size);
  EXPECT_FALSE(read(text + "}"));
  EXPECT_FALSE(read(text + text));
  EXPECT_FALSE(read("[" + text + "]"));
  EXPECT_FALSE(read("null"));
  EXPECT_FALSE(read("acc-sample 3 -7 18000000000000000000 0.1"));
}

// What nlohmann alone would read as a number (a bool, a fraction, a wrapped negative) or would
// throw on is refused alike.
TEST(StoreJsonTest, AFieldOfAnotherTypeReadsAsNothingNotAsADefault) {
  EXPECT_FALSE(read(with("count", "-7")));
  EXPECT_FALSE(read(with("count", "x")));
  EXPECT_FALSE(read(with("count", nullptr)));
  EXPECT_FALSE(read(with("count", true)));
  EXPECT_FALSE(read(with("count", 2.5)));
  EXPECT_FALSE(read(with("count", 4'294'967'296)));  // past an int
  EXPECT_FALSE(read(with("total", -1)));
  EXPECT_FALSE(read(with("seconds", "0.1")));
  EXPECT_FALSE(read(with("name", 3)));
  EXPECT_FALSE(read(with("on", 1)));
  EXPECT_FALSE(read(with("list", "1,-2,3")));
  EXPECT_FALSE(read(with("list", {1, "2"})));
}

TEST(StoreJsonTest, AMissingOrUnknownFieldReadsAsNothing) {
  for (const char* field : {"count", "total", "seconds", "name", "on", "list"})
    EXPECT_FALSE(read(without(field))) << field;
  EXPECT_FALSE(read(with("extra", 1)));
}

TEST(StoreJsonTest, BytesThatAreNotUtf8AreReplacedNotThrown) {
  Sample s = sample();
  s.name = "host\xff-b";
  const std::optional<Sample> back = read(to_store_json(s, kSampleFormat));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->name, "host\xEF\xBF\xBD-b");  // U+FFFD
}

}  // namespace
}  // namespace acc::launcher
