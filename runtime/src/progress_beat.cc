#include "progress_beat.h"

#include "acc/common/clock.h"
#include "acc/common/store_keys.h"

namespace acc::runtime::detail {

ProgressBeat::ProgressBeat(c10::intrusive_ptr<c10d::Store> store, int rank)
    : store_(std::move(store)), key_(store_keys::beat(rank)) {}

void ProgressBeat::step() {
  const auto now = acc::Clock::machine().now();
  if (broken_ || !store_ || now < next_beat_) return;
  next_beat_ = now + std::chrono::seconds(1);
  try {
    store_->add(key_, 1);
  } catch (const std::exception&) {
    broken_ = true;
  }
}

}  // namespace acc::runtime::detail
