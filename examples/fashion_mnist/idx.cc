#include "idx.h"

#include <zlib.h>

#include <filesystem>
#include <vector>

#include "acc/common/error.h"

namespace fashion_mnist {
namespace {

// gzread reads plain files too, so one path serves both forms.
std::vector<uint8_t> read_file(const std::string& dir, const std::string& name) {
  std::string path = dir + "/" + name;
  if (!std::filesystem::exists(path)) path += ".gz";
  ACC_CHECK(std::filesystem::exists(path), acc::ConfigError, "no ", name, "[.gz] in '", dir,
            "'; pass --data-dir with the Fashion-MNIST idx files");
  gzFile file = gzopen(path.c_str(), "rb");
  ACC_CHECK(file != nullptr, acc::ConfigError, "cannot open ", path);
  std::vector<uint8_t> bytes;
  uint8_t chunk[1 << 16];
  int n = 0;
  while ((n = gzread(file, chunk, sizeof(chunk))) > 0) bytes.insert(bytes.end(), chunk, chunk + n);
  gzclose(file);
  return bytes;
}

uint32_t big_endian(const std::vector<uint8_t>& b, size_t at) {
  return uint32_t{b[at]} << 24 | uint32_t{b[at + 1]} << 16 | uint32_t{b[at + 2]} << 8 | b[at + 3];
}

}  // namespace

torch::Tensor read_images(const std::string& dir, const std::string& split) {
  const std::string name = split + "-images-idx3-ubyte";
  auto bytes = read_file(dir, name);
  ACC_CHECK(bytes.size() >= 16 && big_endian(bytes, 0) == 2051, acc::ConfigError, name,
            " is not an idx3 image file");
  const int64_t n = big_endian(bytes, 4), rows = big_endian(bytes, 8), cols = big_endian(bytes, 12);
  ACC_CHECK(bytes.size() == static_cast<size_t>(16 + n * rows * cols), acc::ConfigError, name,
            " is truncated");
  auto images = torch::from_blob(bytes.data() + 16, {n, 1, rows, cols}, torch::kUInt8)
                    .to(torch::kFloat)
                    .div_(255.0);
  return images.sub_(0.2860).div_(0.3530);
}

torch::Tensor read_labels(const std::string& dir, const std::string& split) {
  const std::string name = split + "-labels-idx1-ubyte";
  auto bytes = read_file(dir, name);
  ACC_CHECK(bytes.size() >= 8 && big_endian(bytes, 0) == 2049, acc::ConfigError, name,
            " is not an idx1 label file");
  const int64_t n = big_endian(bytes, 4);
  ACC_CHECK(bytes.size() == static_cast<size_t>(8 + n), acc::ConfigError, name, " is truncated");
  return torch::from_blob(bytes.data() + 8, {n}, torch::kUInt8).to(torch::kLong);
}

}  // namespace fashion_mnist
