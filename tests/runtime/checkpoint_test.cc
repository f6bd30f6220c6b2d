// Accelerator::save_state / load_state in a world of one: what load_state refuses, each time with
// one acc::ConfigError naming the file and the fix rather than LibTorch's own error; and under
// acc-launch (ACC_CHECKPOINT_MEMORY), the saves in the node's memory.

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "acc/common/files.h"
#include "acc/runtime/runtime.h"
#include "worker_run.h"

namespace {

using acc::testing::MemoryUnderTest;
using acc::testing::TempDir;

acc::AcceleratorOptions world_of_one() {
  acc::AcceleratorOptions options;
  options.cpu = true;
  options.apply_omp_num_threads = false;
  options.env = acc::WorkerEnv{};
  return options;
}

struct TwoLayersImpl : torch::nn::Module {
  explicit TwoLayersImpl(int64_t hidden)
      : encoder(register_module("encoder", torch::nn::Linear(8, hidden))),
        decoder(register_module("decoder", torch::nn::Linear(hidden, 4))) {}
  torch::Tensor forward(const torch::Tensor& x) { return decoder(torch::relu(encoder(x))); }
  torch::nn::Linear encoder, decoder;
};
TORCH_MODULE(TwoLayers);

// A TwoLayers(16) and its Adam, prepared on `acc`, one step taken.
struct SteppedTwoLayers {
  explicit SteppedTwoLayers(acc::Accelerator& accelerator)
      : acc(accelerator),
        net(seeded()),
        adam(net->parameters(), torch::optim::AdamOptions(0.01)),
        model(acc.prepare(net)),
        opt(acc.prepare(adam)) {
    step();
  }
  static TwoLayers seeded() {
    torch::manual_seed(1);
    return TwoLayers(16);
  }
  void step() {
    acc.backward(model->forward(torch::ones({2, 8})).sum());
    opt.step();
  }
  torch::Tensor decoder_weight() const { return net->decoder->weight.detach().clone(); }

  acc::Accelerator& acc;
  TwoLayers net;
  torch::optim::Adam adam;
  TwoLayers model;
  acc::AcceleratedOptimizer opt;
};

// A checkpoint of a Linear(8, 4) and its SGD in `dir`.
void save_linear(const std::string& dir) {
  acc::Accelerator acc(world_of_one());
  torch::nn::Linear net(8, 4);
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
  auto [model, opt] = acc.prepare(net, sgd);
  acc.save_state(dir);
}

template <typename F>
std::string config_error(F&& fn) {
  try {
    fn();
  } catch (const acc::ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no acc::ConfigError";
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CheckpointTest, LoadStateBeforePrepareIsAConfigError) {
  TempDir dir;
  save_linear(dir.path() + "/ckpt");
  acc::Accelerator acc(world_of_one());
  const std::string message = config_error([&] { acc.load_state(dir.path() + "/ckpt"); });
  EXPECT_TRUE(contains(message,
                       "holds 1 model(s) and 1 optimizer(s), but 0 and 0 are prepared "
                       "(load_state before prepare)"))
      << message;
}

TEST(CheckpointTest, AnotherModelsCheckpointNamesTheFileAndTheMissingAndUnexpectedNames) {
  TempDir dir;
  save_linear(dir.path() + "/ckpt");
  acc::Accelerator acc(world_of_one());
  TwoLayers net(16);
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
  auto [model, opt] = acc.prepare(net, sgd);
  const auto before = net->encoder->weight.detach().clone();
  const std::string message = config_error([&] { acc.load_state(dir.path() + "/ckpt"); });
  EXPECT_TRUE(contains(message, dir.path() + "/ckpt/model.pt is not this model's checkpoint"))
      << message;
  EXPECT_TRUE(contains(message,
                       "missing 4 (encoder.weight, encoder.bias, decoder.weight, "
                       "decoder.bias), unexpected 2 (bias, weight)"))
      << message;
  EXPECT_FALSE(contains(message, "Exception raised from")) << "no C++ backtrace: " << message;
  EXPECT_TRUE(torch::equal(net->encoder->weight, before)) << "nothing is loaded";
}

TEST(CheckpointTest, TheSameNamesWithOtherShapesAreNamedWithBothShapes) {
  TempDir dir;
  {
    acc::Accelerator acc(world_of_one());
    TwoLayers net(16);
    torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
    auto [model, opt] = acc.prepare(net, sgd);
    acc.save_state(dir.path() + "/ckpt");
  }
  acc::Accelerator acc(world_of_one());
  TwoLayers net(32);
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
  auto [model, opt] = acc.prepare(net, sgd);
  const std::string message = config_error([&] { acc.load_state(dir.path() + "/ckpt"); });
  EXPECT_TRUE(contains(message,
                       "holds other shapes than this model: encoder.weight [16, 8] for "
                       "[32, 8]"))
      << message;
}

TEST(CheckpointTest, ASavedStateLoadsBackIntoTheSameObjects) {
  TempDir dir;
  acc::Accelerator acc(world_of_one());
  SteppedTwoLayers trained(acc);
  acc.save_state(dir.path() + "/ckpt");
  const auto saved = trained.decoder_weight();
  trained.step();
  ASSERT_FALSE(torch::equal(trained.decoder_weight(), saved));
  acc.load_state(dir.path() + "/ckpt");
  EXPECT_TRUE(torch::equal(trained.decoder_weight(), saved));
  EXPECT_EQ(acc.step(), 1);
}

TEST(CheckpointTest, UnderAccLaunchASaveGoesToTheNodesMemoryAndLoadsBackFromThere) {
  namespace fs = std::filesystem;
  TempDir dir;
  const std::string memory = dir.path() + "/memory";
  const std::string ckpt = dir.path() + "/ckpt";
  fs::create_directories(memory);
  MemoryUnderTest under_acc_launch(memory);
  acc::Accelerator acc(world_of_one());
  SteppedTwoLayers trained(acc);
  acc.save_state(ckpt);
  // In memory, with the directory it was saved for; the checkpoint's directory is made (as after
  // a save to storage) and stays empty until the launcher writes the save there.
  EXPECT_TRUE(fs::exists(memory + "/libacc.1/model.pt"));
  EXPECT_TRUE(fs::exists(memory + "/libacc.1/optimizer.pt"));
  EXPECT_TRUE(fs::exists(memory + "/libacc.1/random_states_0.pt"));
  EXPECT_EQ(acc::read_file(memory + "/libacc.1/saved-for"), fs::absolute(ckpt).string());
  EXPECT_TRUE(fs::is_directory(ckpt));
  EXPECT_TRUE(fs::is_empty(ckpt));

  const auto saved = trained.decoder_weight();
  trained.step();
  ASSERT_FALSE(torch::equal(trained.decoder_weight(), saved));
  acc.load_state(ckpt);
  EXPECT_TRUE(torch::equal(trained.decoder_weight(), saved));
  EXPECT_EQ(acc.step(), 1);

  // The node keeps its last two saves, each a link to its slot; the next save takes the next
  // number, and the slot of the save two before it, whose files it writes in place.
  const auto inode = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
  };
  const ino_t model_in_slot1 = inode(memory + "/libacc.slot1/model.pt");
  for (int i = 0; i < 3; ++i) acc.save_state(ckpt);
  std::vector<std::string> saves = acc::names_in(memory, "libacc.");
  std::sort(saves.begin(), saves.end());
  EXPECT_EQ(saves,
            (std::vector<std::string>{"libacc.3", "libacc.4", "libacc.slot0", "libacc.slot1"}));
  EXPECT_EQ(fs::read_symlink(memory + "/libacc.3"), "libacc.slot1");
  EXPECT_EQ(fs::read_symlink(memory + "/libacc.4"), "libacc.slot0");
  EXPECT_NE(model_in_slot1, 0u);
  EXPECT_EQ(inode(memory + "/libacc.slot1/model.pt"), model_in_slot1);
  trained.step();
  acc.load_state(ckpt);
  EXPECT_EQ(acc.step(), 1) << "save 4, in slot 0";
}

TEST(CheckpointTest, UnderAccLaunchAMemoryWithoutRoomIsOneLineAndTheSavesGoToStorage) {
  namespace fs = std::filesystem;
  TempDir dir;
  // A memory that cannot hold a save: a path below a plain file.
  const std::string memory = dir.path() + "/memory";
  ASSERT_EQ(acc::write_file(memory, "a file"), 0);
  const std::string ckpt = dir.path() + "/ckpt";
  MemoryUnderTest under_acc_launch(memory + "/checkpoints");
  acc::Accelerator acc(world_of_one());
  torch::nn::Linear net(8, 4);
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
  auto [model, opt] = acc.prepare(net, sgd);
  ::testing::internal::CaptureStderr();
  acc.save_state(ckpt);
  acc.save_state(ckpt);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(fs::exists(ckpt + "/random_states_0.pt"));
  EXPECT_TRUE(fs::exists(ckpt + "/model.pt"));
  EXPECT_TRUE(contains(err, "acc-launch: checkpoint: no room for save_state in " + memory)) << err;
  EXPECT_TRUE(contains(err, "the saves go to " + ckpt + " as without acc-launch")) << err;
  acc.load_state(ckpt);
  EXPECT_EQ(acc.step(), 0);
}

// A restart's load_state finds no save in the node's memory (its rank landed on another node) and
// reads the checkpoint's directory while the launcher replaces it: it waits for the write.
TEST(CheckpointTest, UnderAccLaunchALoadFromStorageWaitsForTheLaunchersWriteAndFailsAtOnceWithout) {
  namespace fs = std::filesystem;
  TempDir dir;
  const std::string ckpt = dir.path() + "/ckpt";
  acc::Accelerator acc(world_of_one());
  torch::nn::Linear net(8, 4);
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
  auto [model, opt] = acc.prepare(net, sgd);
  {
    MemoryUnderTest under_acc_launch(dir.path() + "/no-memory");
    const auto started = std::chrono::steady_clock::now();
    EXPECT_FALSE(config_error([&] { acc.load_state(ckpt); }).empty());
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(400))
        << "no write under way: the error at once";
  }
  acc.save_state(ckpt);
  fs::rename(ckpt, ckpt + ".acc-old");  // the helper's write, between its two renames
  std::thread helper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    fs::rename(ckpt + ".acc-old", ckpt);
  });
  MemoryUnderTest under_acc_launch(dir.path() + "/memory");
  const auto started = std::chrono::steady_clock::now();
  acc.load_state(ckpt);
  helper.join();
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(500));
}

}  // namespace
