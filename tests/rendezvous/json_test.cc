#include "json.h"

#include <gtest/gtest.h>

#include "acc/common/error.h"

namespace acc::rendezvous::json {
namespace {

TEST(JsonTest, ReadsAnEtcdTransactionReply) {
  // As etcd 3.4's gateway writes it: int64 fields as strings, false booleans left out.
  const Value reply = parse(
      R"({"header":{"cluster_id":"3249","revision":"3","raft_term":"2"},"succeeded":true,)"
      R"("responses":[{"response_range":{"header":{"revision":"3"},"kvs":[{"key":"Zm9v",)"
      R"("create_revision":"2","mod_revision":"3","version":"2","value":"YmF6"}],"count":"1"}},)"
      R"({"response_range":{"header":{"revision":"3"}}}]})");
  ASSERT_NE(reply.find("succeeded"), nullptr);
  EXPECT_TRUE(reply.find("succeeded")->boolean);
  const Value& responses = *reply.find("responses");
  ASSERT_EQ(responses.items.size(), 2u);
  const Value& kv = responses.items[0].find("response_range")->find("kvs")->items.at(0);
  EXPECT_EQ(kv.text_of("value"), "YmF6");
  EXPECT_EQ(kv.text_of("mod_revision"), "3");
  EXPECT_EQ(responses.items[1].find("response_range")->find("kvs"), nullptr);
  EXPECT_EQ(reply.find("header")->text_of("missing", "fallback"), "fallback");
}

TEST(JsonTest, ReadsEveryKindOfValueAndEscape) {
  const Value v =
      parse(" [ null, false, true, -12.5e3, \"a\\\"\\\\\\/\\n\\t\\u00e9\\ud83d\\ude00\", {} ] ");
  ASSERT_EQ(v.kind, Value::Kind::kArray);
  ASSERT_EQ(v.items.size(), 6u);
  EXPECT_EQ(v.items[0].kind, Value::Kind::kNull);
  EXPECT_EQ(v.items[1].kind, Value::Kind::kBool);
  EXPECT_FALSE(v.items[1].boolean);
  EXPECT_TRUE(v.items[2].boolean);
  EXPECT_EQ(v.items[3].text, "-12.5e3");
  EXPECT_EQ(v.items[4].text, "a\"\\/\n\t\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(v.items[5].kind, Value::Kind::kObject);
}

TEST(JsonTest, MalformedTextIsAStoreErrorNamingTheOffset) {
  for (const char* bad : {"", "{", "{\"a\" 1}", "[1,]", "\"open", "tru", "{} x", "\"\\q\""}) {
    EXPECT_THROW(parse(bad), StoreError) << bad;
  }
  try {
    parse("[1, ?]");
    FAIL();
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("offset 4"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse(std::string(200, '[') + std::string(200, ']')), StoreError);
}

TEST(JsonTest, QuoteEscapesWhatJsonMustAndReadsBack) {
  const std::string text = "say \"hi\"\\\n\t\x01 end";
  EXPECT_EQ(quote(text), "\"say \\\"hi\\\"\\\\\\n\\t\\u0001 end\"");
  EXPECT_EQ(parse(quote(text)).text, text);
}

}  // namespace
}  // namespace acc::rendezvous::json
