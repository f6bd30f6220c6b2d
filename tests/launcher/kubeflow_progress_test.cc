// Kubeflow Trainer's TrainJob progress (status/kubeflow_progress.h): which variables name the
// server, the steps a progress file gives, the percentage and the time remaining, and the body
// as KEP-2779's UpdateTrainJobStatusRequest. The posts themselves, over HTTPS to a stand-in
// server: tests/integration/kubeflow/trainjob_progress.sh.

#include "status/kubeflow_progress.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace acc::launcher {
namespace {

using RdzvClock = rendezvous::Clock;
using std::chrono::seconds;

constexpr char kUrl[] =
    "https://kubeflow-trainer-controller-manager.kubeflow.svc:8082/apis/trainer.kubeflow.org/"
    "v1alpha1/namespaces/team-a/trainjobs/mnist/status";

TEST(KubeflowSettingsTest, TheVariablesOfKubeflowTrainerNameTheServerItsCaAndTheTokenFile) {
  std::string problem;
  const auto settings = kubeflow_settings({{"KUBEFLOW_TRAINER_SERVER_URL", kUrl},
                                           {"KUBEFLOW_TRAINER_SERVER_CA_CERT", "/run/kf/ca.crt"},
                                           {"KUBEFLOW_TRAINER_SERVER_TOKEN", "/run/kf/token"}},
                                          problem);
  ASSERT_TRUE(settings) << problem;
  EXPECT_EQ(settings->address, "kubeflow-trainer-controller-manager.kubeflow.svc:8082");
  EXPECT_EQ(settings->target,
            "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/mnist/status");
  EXPECT_EQ(settings->ca_file, "/run/kf/ca.crt");
  EXPECT_EQ(settings->ca_variable, "KUBEFLOW_TRAINER_SERVER_CA_CERT");
  EXPECT_EQ(settings->token_file, "/run/kf/token");
  EXPECT_EQ(settings->interval, seconds(30));
}

TEST(KubeflowSettingsTest, NoUrlIsNoKubeflowTrainerAndNoProblem) {
  std::string problem = "left over";
  EXPECT_FALSE(kubeflow_settings({{"KUBEFLOW_TRAINER_SERVER_TOKEN", "/run/kf/token"}}, problem));
  EXPECT_EQ(problem, "");
}

// The KEP's first draft spelled them _STATUS_; Kubeflow Trainer v2.2 ships _SERVER_, which wins.
TEST(KubeflowSettingsTest, TheKepsFirstSpellingIsReadAndTheReleasedOneWinsWhereBothAreSet) {
  std::string problem;
  auto settings = kubeflow_settings(
      {{"KUBEFLOW_TRAINER_STATUS_URL", "https://a:1/x"}, {"KUBEFLOW_TRAINER_STATUS_TOKEN", "/t"}},
      problem);
  ASSERT_TRUE(settings) << problem;
  EXPECT_EQ(settings->url_variable, "KUBEFLOW_TRAINER_STATUS_URL");
  EXPECT_EQ(settings->token_variable, "KUBEFLOW_TRAINER_STATUS_TOKEN");
  EXPECT_EQ(settings->token_file, "/t");
  EXPECT_EQ(settings->ca_file, "");  // none given: the system's CAs
  settings = kubeflow_settings(
      {{"KUBEFLOW_TRAINER_STATUS_URL", "https://a:1/x"}, {"KUBEFLOW_TRAINER_SERVER_URL", kUrl}},
      problem);
  ASSERT_TRUE(settings) << problem;
  EXPECT_EQ(settings->url_variable, "KUBEFLOW_TRAINER_SERVER_URL");
  EXPECT_EQ(settings->url, kUrl);
}

TEST(KubeflowSettingsTest, UrlsTakePort443AnIpv6AddressAndAQuery) {
  std::string problem;
  auto settings =
      kubeflow_settings({{"KUBEFLOW_TRAINER_SERVER_URL", "HTTPS://status.example"}}, problem);
  ASSERT_TRUE(settings) << problem;
  EXPECT_EQ(settings->address, "status.example:443");
  EXPECT_EQ(settings->target, "/");
  settings =
      kubeflow_settings({{"KUBEFLOW_TRAINER_SERVER_URL", "https://[fd00::1]:8082?x=1"}}, problem);
  ASSERT_TRUE(settings) << problem;
  EXPECT_EQ(settings->address, "[fd00::1]:8082");
  EXPECT_EQ(settings->target, "/?x=1");
}

TEST(KubeflowSettingsTest, AUrlThatIsNotHttpsOrABadIntervalIsAProblemInOneLine) {
  std::string problem;
  EXPECT_FALSE(kubeflow_settings({{"KUBEFLOW_TRAINER_SERVER_URL", "http://a:80/x"}}, problem));
  EXPECT_EQ(problem, "KUBEFLOW_TRAINER_SERVER_URL=http://a:80/x: not an https:// URL");
  EXPECT_FALSE(kubeflow_settings({{"KUBEFLOW_TRAINER_SERVER_URL", "https://a:99999/x"}}, problem));
  EXPECT_NE(problem.find("not 1-65535"), std::string::npos) << problem;
  EXPECT_FALSE(kubeflow_settings({{"KUBEFLOW_TRAINER_SERVER_URL", "https://u:p@a/x"}}, problem));
  EXPECT_NE(problem.find("user name"), std::string::npos) << problem;
  EXPECT_FALSE(kubeflow_settings(
      {{"KUBEFLOW_TRAINER_SERVER_URL", kUrl}, {"ACC_KUBEFLOW_PROGRESS_INTERVAL", "soon"}},
      problem));
  EXPECT_NE(problem.find("ACC_KUBEFLOW_PROGRESS_INTERVAL=soon"), std::string::npos) << problem;
}

TEST(KubeflowSettingsTest, TheIntervalIsInSecondsAndZeroTurnsThePostsOff) {
  std::string problem;
  auto settings = kubeflow_settings(
      {{"KUBEFLOW_TRAINER_SERVER_URL", kUrl}, {"ACC_KUBEFLOW_PROGRESS_INTERVAL", "2.5"}}, problem);
  ASSERT_TRUE(settings) << problem;
  EXPECT_EQ(settings->interval, std::chrono::milliseconds(2500));
  EXPECT_FALSE(kubeflow_settings(
      {{"KUBEFLOW_TRAINER_SERVER_URL", kUrl}, {"ACC_KUBEFLOW_PROGRESS_INTERVAL", "0"}}, problem));
  EXPECT_EQ(problem, "");
}

progress_file::Snapshot written(std::uint64_t beats, std::uint64_t step = 0,
                                std::uint64_t total = 0) {
  progress_file::Snapshot s;
  s.writer_pid = 7;
  s.beats = beats;
  s.step = step;
  s.total_steps = total;
  return s;
}

TEST(StepSampleTest, TheLowestRankThatWritesGivesItsStepElseItsBeats) {
  const RdzvClock::time_point at{seconds(5)};
  StepSample sample = step_sample({progress_file::Snapshot{}, written(4), written(9)}, at);
  EXPECT_TRUE(sample.known);
  EXPECT_EQ(sample.step, 4u);
  EXPECT_EQ(sample.total, 0u);
  EXPECT_EQ(sample.at, at);
  sample = step_sample({written(4, 1200, 5000)}, at);
  EXPECT_EQ(sample.step, 1200u);
  EXPECT_EQ(sample.total, 5000u);
  EXPECT_FALSE(step_sample({written(0)}, at).known);  // started, no step yet
  EXPECT_FALSE(step_sample({progress_file::Snapshot{}}, at).known);
}

StepSample at_step(int second, std::uint64_t step, std::uint64_t total) {
  return StepSample{true, step, total, RdzvClock::time_point{seconds(second)}};
}

TEST(ProgressEstimateTest, ATotalGivesThePercentageAndTheRateOfStepsTheTimeRemaining) {
  ProgressEstimate estimate;
  estimate.attempt_started(0);
  EXPECT_FALSE(estimate.known());
  estimate.add(at_step(100, 100, 1000));
  TrainerStatus status = estimate.status(false);
  EXPECT_EQ(status.percent, 10);
  EXPECT_FALSE(status.remaining_seconds);  // one sample: no rate yet
  estimate.add(at_step(110, 150, 1000));   // 5 steps a second
  status = estimate.status(false);
  EXPECT_EQ(status.percent, 15);
  EXPECT_EQ(status.remaining_seconds, 170);  // 850 steps
  EXPECT_EQ(status.step, 150u);
  EXPECT_EQ(status.total, 1000u);
}

TEST(ProgressEstimateTest, WithoutATotalOnlyTheStepAndAtASuccessfulEnd100Percent) {
  ProgressEstimate estimate;
  estimate.attempt_started(0);
  estimate.add(at_step(1, 5, 0));
  estimate.add(at_step(2, 9, 0));
  TrainerStatus status = estimate.status(false);
  EXPECT_FALSE(status.percent);
  EXPECT_FALSE(status.remaining_seconds);
  EXPECT_EQ(status.step, 9u);
  EXPECT_FALSE(status.total);
  status = estimate.status(true);
  EXPECT_EQ(status.percent, 100);
  EXPECT_EQ(status.remaining_seconds, 0);
}

TEST(ProgressEstimateTest, ARestartMeasuresTheRateAgainAndPastTheTotalIsDone) {
  ProgressEstimate estimate;
  estimate.attempt_started(0);
  estimate.add(at_step(0, 10, 100));
  estimate.add(at_step(10, 20, 100));
  estimate.attempt_started(1);  // resumed from a checkpoint at step 15, after a slow start
  EXPECT_TRUE(estimate.known());
  EXPECT_FALSE(estimate.status(false).remaining_seconds);
  EXPECT_EQ(estimate.status(false).restarts, 1);
  estimate.add(at_step(100, 15, 100));
  estimate.add(at_step(105, 25, 100));                      // 2 steps a second
  EXPECT_EQ(estimate.status(false).remaining_seconds, 38);  // 75 steps, rounded up
  estimate.add(at_step(110, 130, 100));
  EXPECT_EQ(estimate.status(false).percent, 100);
  EXPECT_EQ(estimate.status(false).remaining_seconds, 0);
}

TEST(TrainerStatusBodyTest, TheBodyIsKep2779sUpdateRequestWithNamedMetricsAsStrings) {
  TrainerStatus status;
  status.percent = 45;
  status.remaining_seconds = 120;
  status.step = 450;
  status.total = 1000;
  status.restarts = 2;
  const RdzvClock::wall_time_point at{seconds(1'780'000'000)};
  const nlohmann::json body = nlohmann::json::parse(trainer_status_body(status, at));
  const nlohmann::json expected = {{"trainerStatus",
                                    {{"progressPercentage", 45},
                                     {"estimatedRemainingSeconds", 120},
                                     {"metrics",
                                      {{{"name", "current_step"}, {"value", "450"}},
                                       {{"name", "total_steps"}, {"value", "1000"}},
                                       {{"name", "restarts"}, {"value", "2"}}}},
                                     {"lastUpdatedTime", "2026-05-28T20:26:40Z"}}}};
  EXPECT_EQ(body, expected);
}

TEST(TrainerStatusBodyTest, WhatIsUnknownIsLeftOut) {
  const nlohmann::json body =
      nlohmann::json::parse(trainer_status_body(TrainerStatus{}, RdzvClock::wall_time_point{}));
  const nlohmann::json& status = body.at("trainerStatus");
  EXPECT_FALSE(status.contains("progressPercentage"));
  EXPECT_FALSE(status.contains("estimatedRemainingSeconds"));
  EXPECT_EQ(status.at("metrics").size(), 1u);  // restarts
  EXPECT_EQ(status.at("lastUpdatedTime"), "1970-01-01T00:00:00Z");
}

}  // namespace
}  // namespace acc::launcher
