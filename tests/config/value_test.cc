#include "acc/config/value.h"

#include <gtest/gtest.h>

#include "yaml_value.h"

namespace acc::config {
namespace {

using detail::needs_quotes;
using detail::resolve_plain_scalar;

TEST(PythonFloatReprTest, MatchesPythonRepr) {
  EXPECT_EQ(python_float_repr(1.0), "1.0");
  EXPECT_EQ(python_float_repr(0.1), "0.1");
  EXPECT_EQ(python_float_repr(1e-5), "1e-05");
  EXPECT_EQ(python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(python_float_repr(1e16), "1e+16");
  EXPECT_EQ(python_float_repr(1e8), "100000000.0");
  EXPECT_EQ(python_float_repr(-2.5), "-2.5");
  EXPECT_EQ(python_float_repr(123.456), "123.456");
}

TEST(ResolvePlainScalarTest, ReadsYaml11BooleansAsPyYamlDoes) {
  for (const char* yes : {"yes", "Yes", "YES", "true", "True", "on", "ON"}) {
    const Value v = resolve_plain_scalar(yes, false);
    EXPECT_EQ(v.kind, Value::Kind::kBool) << yes;
    EXPECT_TRUE(v.boolean) << yes;
  }
  for (const char* no : {"no", "No", "NO", "false", "off", "Off"}) {
    const Value v = resolve_plain_scalar(no, false);
    EXPECT_EQ(v.kind, Value::Kind::kBool) << no;
    EXPECT_FALSE(v.boolean) << no;
  }
  // PyYAML does not take y/n as booleans.
  EXPECT_EQ(resolve_plain_scalar("y", false).kind, Value::Kind::kString);
  EXPECT_EQ(resolve_plain_scalar("n", false).kind, Value::Kind::kString);
}

TEST(ResolvePlainScalarTest, ReadsNumbersAndNullAsPyYamlDoes) {
  EXPECT_EQ(resolve_plain_scalar("0755", false).integer, 493);
  EXPECT_EQ(resolve_plain_scalar("0x1f", false).integer, 31);
  EXPECT_EQ(resolve_plain_scalar("1_000", false).integer, 1000);
  EXPECT_EQ(resolve_plain_scalar("1:30", false).integer, 90);
  EXPECT_EQ(resolve_plain_scalar("1.0", false).kind, Value::Kind::kFloat);
  // PyYAML needs a dot in a float: 1e8 stays a string; json.load reads a number.
  EXPECT_EQ(resolve_plain_scalar("1e8", false).kind, Value::Kind::kString);
  EXPECT_EQ(resolve_plain_scalar("1e8", true).kind, Value::Kind::kFloat);
  EXPECT_EQ(resolve_plain_scalar("1.0e+8", false).real, 1e8);
  EXPECT_TRUE(resolve_plain_scalar("~", false).is_null());
  EXPECT_TRUE(resolve_plain_scalar("null", false).is_null());
  EXPECT_EQ(resolve_plain_scalar("0,1", false).kind, Value::Kind::kString);
  EXPECT_EQ(resolve_plain_scalar("08", false).kind, Value::Kind::kString);
}

TEST(PythonStrTest, GivesWhatPythonStrGives) {
  EXPECT_EQ(Value::of_bool(true).python_str(), "True");
  EXPECT_EQ(Value::null().python_str(), "None");
  EXPECT_EQ(Value::of_int(2).python_str(), "2");
  EXPECT_EQ(Value::of_float(1.0).python_str(), "1.0");
  Value list;
  list.kind = Value::Kind::kList;
  list.items = {Value::of_string("a"), Value::of_bool(false)};
  EXPECT_EQ(list.python_str(), "['a', False]");
}

TEST(NeedsQuotesTest, QuotesWhatYamlWouldReadAsAnotherType) {
  EXPECT_TRUE(needs_quotes("no"));
  EXPECT_TRUE(needs_quotes("NO"));
  EXPECT_TRUE(needs_quotes("1"));
  EXPECT_TRUE(needs_quotes(""));
  EXPECT_TRUE(needs_quotes("null"));
  EXPECT_TRUE(needs_quotes("a: b"));
  // What PyYAML resolves that our reader does not: a date, a timestamp, the merge and value keys.
  EXPECT_TRUE(needs_quotes("2024-01-31"));
  EXPECT_TRUE(needs_quotes("2024-1-31 10:30:00.5 +01:00"));
  EXPECT_TRUE(needs_quotes("<<"));
  EXPECT_TRUE(needs_quotes("="));
  EXPECT_TRUE(needs_quotes("2024-01-31T1:02:03Z"));
  EXPECT_FALSE(needs_quotes("2024-01-31x"));
  EXPECT_FALSE(needs_quotes("2024-1-31"));  // PyYAML too: a date has two-digit months and days
  EXPECT_FALSE(needs_quotes("0,1,2,3"));
  EXPECT_FALSE(needs_quotes("all"));
  EXPECT_FALSE(needs_quotes("MULTI_GPU"));
  EXPECT_FALSE(needs_quotes("/home/user/hostfile"));
}

}  // namespace
}  // namespace acc::config
