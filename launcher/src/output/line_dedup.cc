#include "acc/launcher/output/line_dedup.h"
#include "acc/common/strings.h"

#include <algorithm>

#include "acc/common/int_ranges.h"

namespace acc::launcher {
namespace {}  // namespace

LineDedup::LineDedup(std::chrono::milliseconds window, PrefixFn prefix)
    : window_(window), prefix_(std::move(prefix)) {}

void LineDedup::add_source(int source) {
  sources_[source];
}

void LineDedup::add(int source, std::string_view line, Clock::time_point now) {
  Source& s = sources_[source];
  s.queue.push_back({std::string(line), std::hash<std::string_view>{}(line), now});
  ++s.pending[s.queue.back().hash];
}

void LineDedup::finish_source(int source) {
  sources_[source].finished = true;
}

// The sources whose head is `text`.
std::vector<int> LineDedup::sharing_head(const std::string& text) const {
  std::vector<int> group;
  for (const auto& [id, s] : sources_)
    if (!s.queue.empty() && s.queue.front().text == text) group.push_back(id);
  return group;
}

bool LineDedup::take_one(std::optional<Clock::time_point> now, std::string& out) {
  // Oldest heads first, so that what comes out stays close to the order it was printed in.
  std::vector<std::pair<Clock::time_point, int>> heads;
  for (const auto& [id, s] : sources_)
    if (!s.queue.empty()) heads.emplace_back(s.queue.front().seen, id);
  std::sort(heads.begin(), heads.end());
  if (heads.empty()) return false;
  auto emit = [&](const std::string& text, const std::vector<int>& group) {
    auto prefix = prefixes_.find(group);
    if (prefix == prefixes_.end()) prefix = prefixes_.emplace(group, prefix_(group)).first;
    // A rank's line that PyTorch prefixed already (worker_stream.cc) gets no second prefix.
    if (group.size() != 1 || !std::string_view(text).starts_with(prefix->second))
      out += prefix->second;
    out += text;
    if (text.empty() || (text.back() != '\n' && text.back() != '\r')) out += '\n';
    for (int member : group) {
      Source& s = sources_[member];
      auto count = s.pending.find(s.queue.front().hash);
      if (--count->second == 0) s.pending.erase(count);
      s.queue.pop_front();
    }
  };
  for (const auto& [seen, id] : heads) {
    const Line& head = sources_[id].queue.front();
    const std::string& text = head.text;  // valid until emit pops it
    const std::vector<int> group = sharing_head(text);
    bool everyone = true;   // every source that may still print has it at its head
    bool passed_by = true;  // every other source has moved on without printing it
    for (const auto& [other, s] : sources_) {
      if (std::find(group.begin(), group.end(), other) != group.end()) continue;
      if (s.finished && s.queue.empty()) continue;
      everyone = false;
      // Moved on: it printed lines after this one was seen, none of them this text. (A source
      // that printed nothing since may just be behind, about to print it too; one that ended is
      // not.)
      const bool moved_on = !s.queue.empty() && (!now || s.finished || s.queue.back().seen > seen);
      if (!moved_on || s.pending.count(head.hash)) passed_by = false;
    }
    if (everyone || passed_by || (now && *now >= seen + window_)) {
      emit(text, group);
      return true;
    }
  }
  if (now) return false;
  // Nothing more will come and the heads wait on each other (one source printed a then b, another
  // b then a): the oldest goes first.
  const std::string& text = sources_[heads.front().second].queue.front().text;
  emit(text, sharing_head(text));
  return true;
}

std::string LineDedup::take_due(Clock::time_point now) {
  std::string out;
  while (take_one(now, out)) {
  }
  return out;
}

std::string LineDedup::take_all() {
  for (auto& [id, s] : sources_) s.finished = true;
  std::string out;
  while (take_one(std::nullopt, out)) {
  }
  return out;
}

std::optional<LineDedup::Clock::time_point> LineDedup::next_due() const {
  std::optional<Clock::time_point> due;
  for (const auto& [id, s] : sources_)
    if (!s.queue.empty() && (!due || s.queue.front().seen + window_ < *due))
      due = s.queue.front().seen + window_;
  return due;
}

std::string expand_group_prefix(const std::string& prefix_template, const std::vector<int>& ranks,
                                const std::vector<int>& local_ranks, const std::string& role,
                                const std::string& hostname) {
  std::string prefix = replace_all(prefix_template, "${rank}", format_int_ranges(ranks));
  prefix = replace_all(prefix, "${local_rank}", format_int_ranges(local_ranks));
  prefix = replace_all(prefix, "${role_name}", role);
  return replace_all(prefix, "${hostname}", hostname);
}

}  // namespace acc::launcher
