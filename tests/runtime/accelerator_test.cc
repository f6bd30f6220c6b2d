// The Accelerator's misuse checks in a world of one (the same checks run on every rank of a
// larger one: distributed_test.cc has the 2-rank plain loss.backward()), and its log lines.

#include "acc/runtime/accelerator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "acc/runtime/runtime.h"

namespace {

acc::AcceleratorOptions world_of_one() {
  acc::AcceleratorOptions options;
  options.cpu = true;
  options.apply_omp_num_threads = false;
  options.env = acc::WorkerEnv{};
  return options;
}

torch::Tensor loss_of(torch::nn::Linear& model) {
  return model->forward(torch::ones({4, 8})).pow(2).mean();
}

// Runs `fn`, which must throw acc::ConfigError, and returns its message.
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

class AcceleratorMisuseTest : public ::testing::Test {
 protected:
  AcceleratorMisuseTest() : acc(world_of_one()) { torch::manual_seed(0); }

  acc::Accelerator acc;
  torch::nn::Linear net{8, 4};
  torch::optim::SGD sgd{net->parameters(), torch::optim::SGDOptions(0.1)};
};

// Harmless with one process, but the same program would train each rank on its own gradients
// with two: refused here already, so that it does not break only once it is launched.
TEST_F(AcceleratorMisuseTest, AStepAfterAPlainLossBackwardIsAConfigErrorNamingAccBackward) {
  auto [model, opt] = acc.prepare(net, sgd);
  loss_of(model).backward();
  const auto before = net->weight.detach().clone();
  const std::string message = config_error([&] { opt.step(); });
  EXPECT_TRUE(contains(message, "call acc.backward(loss) instead of loss.backward()")) << message;
  EXPECT_TRUE(torch::equal(net->weight, before)) << "the step must not run";
  EXPECT_EQ(acc.step(), 0);
}

TEST_F(AcceleratorMisuseTest, APlainLossBackwardAfterAGoodStepIsCaughtAtTheNextStep) {
  auto [model, opt] = acc.prepare(net, sgd);
  acc.backward(loss_of(model));
  opt.step();
  opt.zero_grad();
  loss_of(model).backward();
  EXPECT_TRUE(contains(config_error([&] { opt.step(); }), "loss.backward()"));
}

TEST_F(AcceleratorMisuseTest, AStepAfterBackwardUnderNoSyncOnlyIsAConfigError) {
  auto [model, opt] = acc.prepare(net, sgd);
  {
    auto guard = acc.no_sync();
    acc.backward(loss_of(model));
  }
  EXPECT_TRUE(contains(config_error([&] { opt.step(); }), "no_sync()"));
}

// What must stay allowed: no_sync() micro-batches before a synchronised one (DDP's pattern),
// accumulate()'s skipped steps, two optimizers stepping on one backward, and a step after
// zero_grad() with no backward at all (it changes nothing).
TEST_F(AcceleratorMisuseTest, SynchronisedBackwardsBeforeEachStepAreNotRefused) {
  torch::nn::Linear head(4, 2);
  torch::optim::SGD head_sgd(head->parameters(), torch::optim::SGDOptions(0.1));
  auto [model, head_model, opt, head_opt] = acc.prepare(net, head, sgd, head_sgd);
  auto loss = [&] { return head_model->forward(model->forward(torch::ones({4, 8}))).sum(); };
  {
    auto guard = acc.no_sync();
    acc.backward(loss());
  }
  acc.backward(loss());
  opt.step();
  head_opt.step();
  opt.zero_grad();
  head_opt.zero_grad();
  opt.step();
  EXPECT_EQ(acc.step(), 3);

  acc::AcceleratorOptions options = world_of_one();
  options.gradient_accumulation_steps = 2;
  acc::Accelerator accumulating(options);
  torch::nn::Linear other(8, 4);
  torch::optim::SGD other_sgd(other->parameters(), torch::optim::SGDOptions(0.1));
  auto [other_model, other_opt] = accumulating.prepare(other, other_sgd);
  for (int micro = 0; micro < 4; ++micro) {
    auto guard = accumulating.accumulate();
    accumulating.backward(loss_of(other_model));
    other_opt.step();
    other_opt.zero_grad();
  }
  EXPECT_EQ(accumulating.step(), 2);
}

TEST_F(AcceleratorMisuseTest, BackwardBeforePrepareIsAConfigError) {
  const std::string message = config_error([&] { acc.backward(loss_of(net)); });
  EXPECT_TRUE(contains(message, "acc.backward(loss) before prepare")) << message;
}

TEST_F(AcceleratorMisuseTest, AStepOfAnOptimizerThatPrepareDidNotReturnIsAConfigError) {
  acc.prepare(net);
  acc::AcceleratedOptimizer opt(sgd, acc);
  acc.backward(loss_of(net));
  const std::string message = config_error([&] { opt.step(); });
  EXPECT_TRUE(contains(message, "prepare did not return")) << message;
}

TEST_F(AcceleratorMisuseTest, PreparingTheSameModelTwiceIsAConfigError) {
  acc.prepare(net);
  const std::string message = config_error([&] { acc.prepare(net); });
  EXPECT_TRUE(contains(message, "this model was prepared already")) << message;
}

TEST_F(AcceleratorMisuseTest, PreparingTheSameOptimizerTwiceIsAConfigError) {
  acc.prepare(net, sgd);
  const std::string message = config_error([&] { acc.prepare(sgd); });
  EXPECT_TRUE(contains(message, "this optimizer was prepared already")) << message;
}

TEST_F(AcceleratorMisuseTest, AnOptimizerPreparedBeforeItsModelIsAConfigError) {
  const std::string message = config_error([&] { acc.prepare(sgd, net); });
  EXPECT_TRUE(contains(message, "the optimizer was prepared before its model")) << message;
}

TEST_F(AcceleratorMisuseTest, AnOptimizerOverAModelThatWasNotPreparedIsAConfigError) {
  torch::nn::Linear other(8, 4);
  acc.prepare(other);
  const std::string message = config_error([&] { acc.prepare(sgd); });
  EXPECT_TRUE(contains(message,
                       "parameter 0 of the optimizer (shape [4, 8]) belongs to no "
                       "prepared model"))
      << message;
}

// The logging surface needs nothing but this header: lines name the rank and follow
// ACC_LOG_LEVEL, read when the Accelerator is made.
TEST(AcceleratorLogTest, LinesNameTheRankAndFollowAccLogLevel) {
  ASSERT_EQ(setenv("ACC_LOG_LEVEL", "warning", 1), 0);
  acc::Accelerator acc(world_of_one());
  ASSERT_EQ(unsetenv("ACC_LOG_LEVEL"), 0);
  ::testing::internal::CaptureStderr();
  acc.log_debug("a debug line");
  acc.log_info("an info line");
  acc.log_warning("a warning line");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(contains(err, "a debug line")) << err;
  EXPECT_FALSE(contains(err, "an info line")) << err;
  EXPECT_TRUE(contains(err, "[rank 0/1] [warning] a warning line")) << err;
}

}  // namespace
