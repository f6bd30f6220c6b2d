// The config schema (config/src/schema.cc, ClusterConfig::from_value): the validation a parsed
// config goes through, on documents a YAML file would rarely reach. The bytes are decoded into a
// Value tree whose map keys are mostly the schema's own (top-level and section keys, so that
// validation goes deep), and whose scalars are of every kind; then from_value checks it. The
// last part picks a launch flag and gives it text, as `accelerate launch --<key> TEXT` does
// (flag_value). ConfigError is the schema's answer to bad input; anything else is a bug.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "acc/common/error.h"
#include "acc/config/cluster_config.h"
#include "acc/config/schema.h"

namespace {

using acc::config::Value;

class Reader {
 public:
  Reader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  bool empty() const { return at_ >= size_; }
  std::uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  std::string text() {
    std::size_t length = byte() % 24;
    std::string out;
    while (length-- > 0 && !empty()) out += static_cast<char>(byte());
    return out;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

// A key of the schema (so that checks of real keys run) or, now and then, any text.
std::string key_of(Reader& in, std::string_view section) {
  const std::uint8_t pick = in.byte();
  const auto& keys =
      section.empty() ? acc::config::cluster_keys() : acc::config::section_keys(section);
  if (pick < 16 || keys.empty()) return in.text();
  return std::string(keys[pick % keys.size()].name);
}

Value value_of(Reader& in, std::string_view section, int depth) {
  const std::uint8_t kind = in.byte() % (depth < 3 ? 8 : 6);
  switch (kind) {
    case 0:
      return Value::null();
    case 1:
      return Value::of_bool(in.byte() % 2);
    case 2:
      return Value::of_int(static_cast<std::int8_t>(in.byte()) *
                           (in.byte() % 4 == 0 ? 1LL << 40 : 1LL));
    case 3:
      return Value::of_float(static_cast<std::int8_t>(in.byte()) / 7.0);
    case 4:
    case 5:
      return Value::of_string(in.text());
    case 6: {
      Value list;
      list.kind = Value::Kind::kList;
      for (int n = in.byte() % 4; n > 0 && !in.empty(); --n)
        list.items.push_back(value_of(in, section, depth + 1));
      return list;
    }
    default: {
      // A section (fsdp_config, ...) when the key names one: its own keys inside.
      Value map = Value::map();
      for (int n = in.byte() % 6; n > 0 && !in.empty(); --n) {
        const std::string key = key_of(in, section);
        const bool is_section = !acc::config::section_keys(key).empty();
        map.set(key, value_of(in, is_section ? std::string_view(key) : section, depth + 1));
      }
      return map;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Reader in(data, size);
  Value root = Value::map();
  for (int n = in.byte() % 12; n > 0 && !in.empty(); --n) {
    const std::string key = key_of(in, "");
    const bool is_section = !acc::config::section_keys(key).empty();
    root.set(key, value_of(in, is_section ? std::string_view(key) : "", 1));
  }
  try {
    const auto config = acc::config::ClusterConfig::from_value(root, "fuzz.yaml");
    acc::config::to_yaml(config);
    acc::config::to_json(config);
  } catch (const acc::ConfigError&) {
  }
  const auto& flags = acc::config::launch_flags();
  const acc::config::KeySpec& spec = *flags[in.byte() % flags.size()].spec;
  try {
    acc::config::flag_value(spec, in.text());
  } catch (const acc::ConfigError&) {
  }
  return 0;
}
