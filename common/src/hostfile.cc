#include "acc/common/hostfile.h"

#include <sys/stat.h>
#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "acc/common/error.h"
#include "acc/common/strings.h"

namespace acc {

std::vector<HostfileEntry> parse_hostfile(const std::string& text, const std::string& path) {
  std::vector<HostfileEntry> hosts;
  std::istringstream lines(text);
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    HostfileEntry entry;
    if (!(words >> entry.host)) continue;
    for (std::string word; words >> word;) {
      auto slots = starts_with(word, "slots=") ? parse_int(word.substr(6)) : std::nullopt;
      ACC_CHECK(slots && *slots > 0, ConfigError, path, ":", number, ": '", word,
                "' is not slots=N; lines read: host slots=N");
      // A host's slots are its devices: a count past this is a typo, and each slot is listed.
      constexpr int kMaxSlots = 1 << 16;
      ACC_CHECK(*slots <= kMaxSlots, ConfigError, path, ":", number, ": '", word,
                "' is more slots than a host has (at most ", kMaxSlots, ")");
      entry.slots = *slots;
    }
    hosts.push_back(entry);
  }
  ACC_CHECK(!hosts.empty(), ConfigError, path, ": no hosts; lines read: host slots=N");
  return hosts;
}

std::vector<HostfileEntry> read_hostfile(const std::string& path) {
  struct stat st {};
  ACC_CHECK(::stat(path.c_str(), &st) == 0, ConfigError, "--hostfile ", path, ": no such file");
  ACC_CHECK(S_ISREG(st.st_mode), ConfigError, "--hostfile ", path,
            ": not a regular file; give the file that lists 'host slots=N' a line");
  std::ifstream file(path);
  ACC_CHECK(file, ConfigError, "--hostfile ", path, ": cannot read it");
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  return parse_hostfile(text, path);
}

std::map<std::string, std::vector<int>> parse_host_filter(const std::string& filter,
                                                          const std::string& flag) {
  std::map<std::string, std::vector<int>> hosts;
  // Without '@' or ':' it is a plain comma list of hosts.
  if (filter.find_first_of("@:") == std::string::npos) {
    for (const std::string& host : split(filter, ','))
      if (!host.empty()) hosts[host];
    return hosts;
  }
  for (const std::string& item : split(filter, '@')) {
    const size_t colon = item.find(':');
    const std::string host = item.substr(0, colon);
    ACC_CHECK(!host.empty(), ConfigError, flag, " ", filter,
              ": a host name is missing; write host:0,2@host2");
    std::vector<int>& slots = hosts[host];
    if (colon == std::string::npos) continue;
    for (const std::string& slot : split(item.substr(colon + 1), ',')) {
      const std::optional<int> number = parse_int(slot);
      ACC_CHECK(number && *number >= 0, ConfigError, flag, " ", filter, ": '", slot,
                "' is not a slot number; write host:0,2@host2");
      slots.push_back(*number);
    }
  }
  return hosts;
}

std::vector<SelectedHost> select_hosts(const std::vector<HostfileEntry>& hosts,
                                       const std::string& include, const std::string& exclude) {
  const auto included = parse_host_filter(include, "--include");
  const auto excluded = parse_host_filter(exclude, "--exclude");
  auto check_known = [&](const std::map<std::string, std::vector<int>>& filter, const char* flag) {
    for (const auto& [name, slots] : filter) {
      // The binding through a reference of its own: clang 14 captures no binding in a lambda.
      const std::string& host = name;
      auto entry = std::find_if(hosts.begin(), hosts.end(),
                                [&](const HostfileEntry& e) { return e.host == host; });
      ACC_CHECK(entry != hosts.end(), ConfigError, flag, ": host ", name,
                " is not in the hostfile");
      for (int slot : slots)
        ACC_CHECK(slot < entry->slots, ConfigError, flag, ": ", name, " has slots 0-",
                  entry->slots - 1, ", not ", slot);
    }
  };
  check_known(included, "--include");
  check_known(excluded, "--exclude");

  std::vector<SelectedHost> selected;
  for (const HostfileEntry& entry : hosts) {
    if (!include.empty() && !included.count(entry.host)) continue;
    SelectedHost host{entry.host, {}, entry.slots};
    if (auto it = included.find(entry.host); it != included.end()) host.slots = it->second;
    if (host.slots.empty())
      for (int slot = 0; slot < entry.slots; ++slot) host.slots.push_back(slot);
    if (auto it = excluded.find(entry.host); it != excluded.end()) {
      if (it->second.empty()) continue;  // the whole host
      for (int slot : it->second)
        host.slots.erase(std::remove(host.slots.begin(), host.slots.end(), slot), host.slots.end());
    }
    // A slot named twice is one slot; the order given is kept (it orders CUDA_VISIBLE_DEVICES).
    std::vector<int> unique;
    std::set<int> seen;
    for (int slot : host.slots)
      if (seen.insert(slot).second) unique.push_back(slot);
    host.slots = std::move(unique);
    if (!host.slots.empty()) selected.push_back(std::move(host));
  }
  ACC_CHECK(!selected.empty(), ConfigError, "--include/--exclude left no host of the hostfile");
  return selected;
}

}  // namespace acc
