#include "acc/common/hostfile.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "acc/common/error.h"

namespace acc {
namespace {

using Slots = std::vector<int>;

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(HostfileTest, ReadsHostsAndSlotsSkippingCommentsAndBlankLines) {
  const auto hosts = parse_hostfile("# cluster\nw1 slots=4\nw2   slots=2  # spare\n\nw3\n", "hf");
  EXPECT_EQ(hosts, (std::vector<HostfileEntry>{{"w1", 4}, {"w2", 2}, {"w3", 1}}));
}

TEST(HostfileTest, NamesFileAndLineOfAMalformedLine) {
  EXPECT_EQ(message_of([] { parse_hostfile("w1 slots=4\nw2 slots=x\n", "hf"); }),
            "hf:2: 'slots=x' is not slots=N; lines read: host slots=N");
  EXPECT_EQ(message_of([] { parse_hostfile("w1 slots=0\n", "hf"); }),
            "hf:1: 'slots=0' is not slots=N; lines read: host slots=N");
  // Found by the hostfile fuzzer: a slot count past any host's took seconds to list.
  EXPECT_EQ(message_of([] { parse_hostfile("w1 slots=2000000000\n", "hf"); }),
            "hf:1: 'slots=2000000000' is more slots than a host has (at most 65536)");
  EXPECT_EQ(message_of([] { parse_hostfile("# nothing\n", "hf"); }),
            "hf: no hosts; lines read: host slots=N");
}

TEST(HostfileTest, ReadingADirectoryOrAMissingFileIsOneLine) {
  const std::string dir = ::testing::TempDir();
  EXPECT_EQ(
      message_of([&] { read_hostfile(dir); }),
      "--hostfile " + dir + ": not a regular file; give the file that lists 'host slots=N' a line");
  EXPECT_EQ(message_of([] { read_hostfile("/nonexistent/hostfile"); }),
            "--hostfile /nonexistent/hostfile: no such file");
  const std::string path = dir + "/hostfile_test_" + std::to_string(::getpid());
  std::ofstream(path) << "w1 slots=2\n";
  EXPECT_EQ(read_hostfile(path), (std::vector<HostfileEntry>{{"w1", 2}}));
  std::filesystem::remove(path);
}

TEST(HostFilterTest, ReadsDeepSpeedsGrammarAndPlainCommaLists) {
  using Filter = std::map<std::string, Slots>;
  EXPECT_EQ(parse_host_filter("h1:0,2@h2", "--include"), (Filter{{"h1", {0, 2}}, {"h2", {}}}));
  EXPECT_EQ(parse_host_filter("h1,h2", "--include"), (Filter{{"h1", {}}, {"h2", {}}}));
  EXPECT_EQ(parse_host_filter("h1@h2", "--include"), (Filter{{"h1", {}}, {"h2", {}}}));
  EXPECT_EQ(parse_host_filter("", "--include"), Filter{});
  EXPECT_EQ(message_of([] { parse_host_filter("h1:x", "--include"); }),
            "--include h1:x: 'x' is not a slot number; write host:0,2@host2");
  EXPECT_EQ(message_of([] { parse_host_filter("h1:-1", "--exclude"); }),
            "--exclude h1:-1: '-1' is not a slot number; write host:0,2@host2");
  EXPECT_EQ(message_of([] { parse_host_filter(":0@h2", "--include"); }),
            "--include :0@h2: a host name is missing; write host:0,2@host2");
}

const std::vector<HostfileEntry> kHosts = {{"w1", 4}, {"w2", 4}, {"w3", 2}};

TEST(SelectHostsTest, KeepsEveryHostAndSlotWithoutAFilter) {
  const auto kept = select_hosts(kHosts, "", "");
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[0].slots, (Slots{0, 1, 2, 3}));
  EXPECT_EQ(kept[2].slots, (Slots{0, 1}));
  EXPECT_EQ(kept[2].hostfile_slots, 2);
}

TEST(SelectHostsTest, IncludeKeepsTheNamedHostsAndSlotsInHostfileOrder) {
  const auto kept = select_hosts(kHosts, "w3@w1:2,0,2", "");
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].host, "w1");
  EXPECT_EQ(kept[0].slots, (Slots{2, 0})) << "as given, once each";
  EXPECT_EQ(kept[1].host, "w3");
  EXPECT_EQ(kept[1].slots, (Slots{0, 1}));
}

TEST(SelectHostsTest, ExcludeDropsWholeHostsOrSlots) {
  const auto kept = select_hosts(kHosts, "", "w1:3@w2");
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].slots, (Slots{0, 1, 2}));
  EXPECT_EQ(kept[1].host, "w3");
  EXPECT_EQ(select_hosts(kHosts, "", "w3:0,1").size(), 2u) << "no slot left: no host";
}

TEST(SelectHostsTest, RefusesUnknownHostsAndSlotsAndAnEmptySelection) {
  EXPECT_EQ(message_of([] { select_hosts(kHosts, "foo", ""); }),
            "--include: host foo is not in the hostfile");
  EXPECT_EQ(message_of([] { select_hosts(kHosts, "", "w9:0"); }),
            "--exclude: host w9 is not in the hostfile");
  EXPECT_EQ(message_of([] { select_hosts(kHosts, "w3:2", ""); }),
            "--include: w3 has slots 0-1, not 2");
  EXPECT_EQ(message_of([] { select_hosts(kHosts, "", "w1,w2,w3"); }),
            "--include/--exclude left no host of the hostfile");
}

}  // namespace
}  // namespace acc
