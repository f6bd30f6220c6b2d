#include "acc/launcher/output/line_splitter.h"

namespace acc::launcher {

void LineSplitter::feed(std::string_view bytes) {
  while (!bytes.empty()) {
    const size_t end = bytes.find_first_of("\n\r");
    if (end == std::string_view::npos) {
      pending_.append(bytes);
      if (pending_.size() >= kMaxLine) {
        on_line_(pending_);
        pending_.clear();
      }
      return;
    }
    if (pending_.empty()) {
      on_line_(bytes.substr(0, end + 1));  // the common case: no copy
    } else {
      pending_.append(bytes.substr(0, end + 1));
      on_line_(pending_);
      pending_.clear();
    }
    bytes.remove_prefix(end + 1);
  }
}

void LineSplitter::finish() {
  if (pending_.empty()) return;
  on_line_(pending_);
  pending_.clear();
}

}  // namespace acc::launcher
