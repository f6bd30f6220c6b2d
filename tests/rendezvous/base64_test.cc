#include "base64.h"

#include <gtest/gtest.h>

namespace acc::rendezvous {
namespace {

TEST(Base64Test, EncodesTheRfc4648Vectors) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foob"), "Zm9vYg==");
  EXPECT_EQ(base64_encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
}

TEST(Base64Test, DecodesWhatItEncodesForEveryByte) {
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes += static_cast<char>(i);
  for (size_t length = 0; length <= bytes.size(); length += 37) {
    const std::string part = bytes.substr(bytes.size() - length);
    EXPECT_EQ(base64_decode(base64_encode(part)), part) << length;
  }
  EXPECT_EQ(base64_decode("Zm9vYmE="), "fooba");
  EXPECT_EQ(base64_decode("+/+/"), "\xfb\xff\xbf");
}

TEST(Base64Test, RejectsWhatIsNotPaddedBase64) {
  EXPECT_FALSE(base64_decode("Zm9"));
  EXPECT_FALSE(base64_decode("Zm9*"));
  EXPECT_FALSE(base64_decode("Zg=A"));
  EXPECT_FALSE(base64_decode("Z==="));
}

}  // namespace
}  // namespace acc::rendezvous
