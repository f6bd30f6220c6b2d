#include "acc/rendezvous/job_secret.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include "acc/common/error.h"
#include "acc/common/files.h"

namespace acc::rendezvous {
namespace {

std::string hex(const unsigned char* data, unsigned int size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < size; ++i) {
    out += kDigits[data[i] >> 4];
    out += kDigits[data[i] & 15];
  }
  return out;
}

}  // namespace

std::string job_proof(std::string_view secret, std::string_view nonce) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(nonce.data()), nonce.size(), digest, &size);
  return hex(digest, size);
}

std::string job_nonce(std::string_view salt, unsigned long long connection) {
  const std::string input = std::string(salt) + ":" + std::to_string(connection);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(input.data(), input.size(), digest, &size, EVP_sha256(), nullptr);
  return hex(digest, size);
}

std::string random_salt() {
  unsigned char bytes[32];
  ACC_CHECK(RAND_bytes(bytes, sizeof(bytes)) == 1, SystemError,
            "no random bytes for the store's job secret");
  return hex(bytes, sizeof(bytes));
}

std::string read_job_secret(const std::string& path, const std::string& what) {
  struct stat info {};
  ACC_CHECK(::stat(path.c_str(), &info) == 0, ConfigError, what, " ", path,
            ": cannot read the job secret: ", std::strerror(errno));
  ACC_CHECK((info.st_mode & 077) == 0, ConfigError, what, " ", path,
            ": the job secret can be read by others (mode ", std::oct, (info.st_mode & 0777),
            std::dec, "); chmod 600 ", path);
  std::string secret = read_file(path);
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  ACC_CHECK(!secret.empty(), ConfigError, what, " ", path,
            ": the job secret file is empty or unreadable");
  return secret;
}

}  // namespace acc::rendezvous
