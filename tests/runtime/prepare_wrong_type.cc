// Must not compile: Accelerator::prepare of what it cannot take. prepare_wrong_type.sh builds it
// and expects each static_assert's sentence, one line each rather than pages of candidates.

#include "acc/runtime/runtime.h"

namespace {

class Numbers : public torch::data::datasets::Dataset<Numbers> {
 public:
  torch::data::Example<> get(size_t index) override {
    return {torch::tensor(static_cast<float>(index)), torch::tensor(0)};
  }
  torch::optional<size_t> size() const override { return 8; }
};

}  // namespace

int main() {
  acc::Accelerator acc;
  torch::nn::Linear net(2, 2);
  acc.prepare(torch::data::make_data_loader(Numbers().map(torch::data::transforms::Stack<>())));
  acc.prepare(Numbers());
  auto [model, number] = acc.prepare(net, 42);
  return 0;
}
