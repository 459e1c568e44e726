// Coordinated reads end to end: four consumer processes read one infinite job in rounds;
// every round's batches must come from one worker, also while a worker is killed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <signal.h>

#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tests/integration/cluster.h"

namespace sluice::testing {
namespace {

using ::testing::HasSubstr;

constexpr int kConsumers = 4;
constexpr const char* kPipeline = "range(1000) | batch(8) | repeat()";

struct Line {
  std::string worker;
  int64_t first_value;
  std::vector<int64_t> values;
};

// round -> what one consumer got, from its `read --format jsonl` output (--take rounds).
std::map<int64_t, Line> Rounds(Subprocess& read, int64_t take) {
  EXPECT_EQ(read.Wait(absl::Seconds(120)), 0) << read.stderr_text();
  std::map<int64_t, Line> rounds;
  std::istringstream lines(read.stdout_text());
  int64_t batches = 0;
  int64_t last_round = -1;
  for (std::string text; std::getline(lines, text); ++batches) {
    nlohmann::json line = nlohmann::json::parse(text);
    const int64_t round = line["round"].get<int64_t>();
    EXPECT_GT(round, last_round) << "rounds arrive in order";
    last_round = round;
    const auto values = line["tensors"][0]["values"].get<std::vector<int64_t>>();
    rounds[round] = Line{line["worker"].get<std::string>(), values.at(0), values};
  }
  EXPECT_LE(batches, take);
  EXPECT_LT(last_round, take);
  return rounds;
}

std::vector<std::unique_ptr<Subprocess>> StartConsumers(const std::string& address, int take,
                                                        const std::string& pipeline = kPipeline,
                                                        std::vector<std::string> extra_args = {},
                                                        const std::string& mode = "off") {
  std::vector<std::unique_ptr<Subprocess>> consumers;
  for (int i = 0; i < kConsumers; ++i) {
    std::vector<std::string> args = {"--num-consumers",  std::to_string(kConsumers),
                                     "--consumer-index", std::to_string(i),
                                     "--take",           std::to_string(take)};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    consumers.push_back(StartRead(address, pipeline, mode, "coordinated", args));
  }
  return consumers;
}

// StartConsumers, returning once the first consumer has printed a round (the job runs).
void StartConsumersAndAwaitARound(const std::string& address, int take,
                                  std::vector<std::unique_ptr<Subprocess>>* consumers,
                                  const std::string& pipeline = kPipeline) {
  *consumers = StartConsumers(address, take, pipeline);
  ASSERT_FALSE((*consumers)[0]->WaitForOutput("round", absl::Seconds(30)).empty())
      << (*consumers)[0]->stderr_text();
}

// Rounds() of every consumer, once each has exited.
std::vector<std::map<int64_t, Line>> RoundsOfAll(
    std::vector<std::unique_ptr<Subprocess>>& consumers, int64_t take) {
  std::vector<std::map<int64_t, Line>> per_consumer;
  for (auto& consumer : consumers) per_consumer.push_back(Rounds(*consumer, take));
  return per_consumer;
}

// Every round, whichever consumers got it, came from one worker, with a distinct batch for
// each consumer. Returns how many rounds every consumer got.
int CheckRounds(const std::vector<std::map<int64_t, Line>>& per_consumer,
                std::set<std::string>* workers) {
  std::set<int64_t> all_rounds;
  for (const auto& rounds : per_consumer) {
    for (const auto& [round, line] : rounds) all_rounds.insert(round);
  }
  int complete = 0;
  for (int64_t round : all_rounds) {
    std::set<std::string> round_workers;
    std::set<int64_t> firsts;
    int got = 0;
    for (const auto& rounds : per_consumer) {
      auto it = rounds.find(round);
      if (it == rounds.end()) continue;
      ++got;
      round_workers.insert(it->second.worker);
      firsts.insert(it->second.first_value);
    }
    EXPECT_EQ(round_workers.size(), 1u) << "round " << round << " came from several workers";
    EXPECT_EQ(static_cast<int>(firsts.size()), got) << "round " << round << ": a batch twice";
    workers->insert(round_workers.begin(), round_workers.end());
    if (got == static_cast<int>(per_consumer.size())) ++complete;
  }
  return complete;
}

// What `sluice status --json` says of `worker` (its entry under "workers"; an empty object,
// and a test failure, when the dispatcher does not list it).
nlohmann::json WorkerStatus(const std::string& dispatcher, const std::string& worker) {
  Subprocess status({Binary(), "status", "--dispatcher", dispatcher, "--json"});
  EXPECT_EQ(status.Wait(absl::Seconds(30)), 0) << status.stderr_text();
  const nlohmann::json parsed = nlohmann::json::parse(status.stdout_text());
  for (const nlohmann::json& listed : parsed["workers"]) {
    if (listed["address"] == worker) return listed;
  }
  ADD_FAILURE() << "worker " << worker << " is not in the status: " << status.stdout_text();
  return nlohmann::json::object();
}

// Batches that never repeat, so a batch's first value names its place in the worker's stream.
constexpr const char* kUniqueBatches = "range(100000000) | batch(8) | repeat()";

// In every round from `from` on that all consumers got, their batches are consecutive in the
// worker's stream (OFF mode, kUniqueBatches): the round waited for every consumer rather
// than going ahead without one that then got a batch from further on.
void ExpectRoundsInStep(const std::vector<std::map<int64_t, Line>>& per_consumer, int64_t from) {
  int out_of_step = 0;
  for (const auto& [round, line] : per_consumer[0]) {
    if (round < from) continue;
    int64_t lowest = line.first_value / 8;
    int64_t highest = lowest;
    std::string batches;
    bool complete = true;
    for (const auto& rounds : per_consumer) {
      auto it = rounds.find(round);
      if (it == rounds.end()) {
        complete = false;
        break;
      }
      lowest = std::min(lowest, it->second.first_value / 8);
      highest = std::max(highest, it->second.first_value / 8);
      absl::StrAppend(&batches, " ", it->second.first_value / 8);
    }
    if (!complete || highest - lowest < static_cast<int64_t>(per_consumer.size())) continue;
    if (++out_of_step <= 5)
      ADD_FAILURE() << "round " << round << " out of step, batches" << batches;
  }
  EXPECT_EQ(out_of_step, 0) << "rounds whose batches are not consecutive";
}

// From the first round on, each round's batches are consecutive: a consumer told to retry
// its first rounds (it asked before its worker knew the task) used to ask for later rounds
// meanwhile, while the others held the first ones, and every round then waited out the
// round wait and went ahead without someone.
TEST(CoordinatedReadsTest, EveryRoundComesFromOneWorker) {
  Cluster cluster(2);
  auto consumers = StartConsumers(cluster.address(), 40, kUniqueBatches);
  std::vector<std::map<int64_t, Line>> per_consumer = RoundsOfAll(consumers, 40);
  for (const auto& rounds : per_consumer) {
    ASSERT_EQ(rounds.size(), 40u);
    EXPECT_EQ(rounds.begin()->first, 0);
    EXPECT_EQ(rounds.rbegin()->first, 39) << "no round skipped without a failure";
  }
  std::set<std::string> workers;
  EXPECT_EQ(CheckRounds(per_consumer, &workers), 40);
  EXPECT_EQ(workers.size(), 2u) << "rounds rotate over both workers";
  ExpectRoundsInStep(per_consumer, 0);
}

// Each consumer drops its connection every 17 batches (fault injection), losing the replies
// in flight on it. The worker keeps every batch until its consumer acknowledges it and serves
// a round asked for again with the same batch, so with one worker the rounds still hold
// batches 0, 1, 2, ... each exactly once (before acknowledgements, a lost reply's batch was
// gone and the repeated request got a fresh one a round wait later).
// The worker keeps at most half its slabs for acknowledgements, and packs small batches
// into shared slabs: the test cluster's 8 slabs of 1 MiB cover four consumers with four
// requests in flight each, all breaking at once. Before packing each kept batch held a slab
// of its own, and this test needed 64.
TEST(CoordinatedReadsTest, DroppedConnectionsLoseNoBatch) {
  Cluster cluster(1);
  constexpr int kTake = 200;
  constexpr int kBatch = 8;
  auto consumers =
      StartConsumers(cluster.address(), kTake, "range(100000000) | batch(8) | repeat()",
                     {"--test-disconnect-every", "17"});
  std::vector<std::map<int64_t, Line>> per_consumer = RoundsOfAll(consumers, kTake);
  std::set<int64_t> batches;
  for (const auto& rounds : per_consumer) {
    EXPECT_EQ(rounds.size(), static_cast<size_t>(kTake)) << "no round skipped";
    for (const auto& [round, line] : rounds) {
      EXPECT_TRUE(batches.insert(line.first_value / kBatch).second)
          << "batch " << line.first_value / kBatch << " twice";
    }
  }
  // Rounds requested ahead of --take may take the batches after the last round printed, and
  // a round whose first request was lost may be filled after the next one: only the last
  // few rounds' batches may be missing.
  constexpr int64_t kSlack = kConsumers * 16;
  for (int64_t batch = 0; batch < kConsumers * kTake - kSlack; ++batch) {
    EXPECT_TRUE(batches.contains(batch)) << "batch " << batch << " lost";
  }
  std::set<std::string> workers;
  EXPECT_EQ(CheckRounds(per_consumer, &workers), kTake);
  // The lost replies were served again from what the worker kept (it reports its counters
  // with its heartbeats), and its slabs kept everything until acknowledged.
  int64_t redelivered = 0;
  int64_t released = -1;
  for (absl::Time deadline = absl::Now() + absl::Seconds(10);
       redelivered == 0 && absl::Now() < deadline; absl::SleepFor(absl::Milliseconds(100))) {
    const nlohmann::json worker = WorkerStatus(cluster.address(), cluster.worker_address(0));
    redelivered = worker.value("batches_redelivered", int64_t{0});
    released = worker.value("kept_batches_released", int64_t{-1});
  }
  EXPECT_GT(redelivered, 0);
  EXPECT_EQ(released, 0);
}

// The round wait outlasts detecting the loss (by default 1.5 x the worker timeout + 1 s,
// see DispatcherConfig::round_wait), so the rounds stay aligned through it.
//
// Over shared memory a consumer may restart its UCX worker when the dead worker leaves its
// receive queue stalled, which breaks its connection to the survivor too; the replies in
// flight on it are served again from what the survivor kept. Before small batches were
// packed into shared slabs, a CI run found them let go (8 slabs, so 4 kept batches for four
// consumers): the consumers' requests opened those rounds afresh and got batches from
// further on.
TEST(CoordinatedReadsTest, ConsumersGoOnWhenAWorkerDies) {
  Cluster cluster({.workers = 2, .dispatcher_args = {"--worker-timeout", "2s"}});
  constexpr int kTake = 3000;
  std::vector<std::unique_ptr<Subprocess>> consumers;
  ASSERT_NO_FATAL_FAILURE(
      StartConsumersAndAwaitARound(cluster.address(), kTake, &consumers, kUniqueBatches));
  cluster.KillWorker(0);
  const absl::Time killed = absl::Now();
  std::vector<std::map<int64_t, Line>> per_consumer = RoundsOfAll(consumers, kTake);
  // Bounded by the worker timeout and the heartbeats, not by request timeouts.
  // Under the 60 s fetch deadline a stall would wait out; the tail itself takes 2-7 s.
  EXPECT_LT(absl::Now() - killed, absl::Seconds(45)) << "consumers stalled";
  std::set<std::string> workers;
  EXPECT_GT(CheckRounds(per_consumer, &workers), kTake / 2);
  for (const auto& rounds : per_consumer) {
    EXPECT_GT(rounds.size(), static_cast<size_t>(kTake / 2));
    EXPECT_GE(rounds.rbegin()->first, kTake - 2) << "every consumer reads to the end";
  }
  // After the dead worker's last round only the survivor serves.
  for (const auto& rounds : per_consumer) {
    EXPECT_EQ(rounds.rbegin()->second.worker, cluster.worker_address(1));
  }
  // Consumers stalled on the dead worker's rounds at different places (up to their request
  // window apart) and the last one to learn of the loss asks the survivor for the rounds
  // past its window only then: the survivor's rounds wait for it that long. With a fixed
  // 1 s wait (the default before) they went ahead without it, and its batches of those rounds came
  // from hundreds of batches further on (with range(1000) data, the same values as another
  // consumer's). The first rounds are left out: consumers start up to seconds apart.
  ExpectRoundsInStep(per_consumer, 16);
  EXPECT_EQ(WorkerStatus(cluster.address(), cluster.worker_address(1))
                .value("kept_batches_released", int64_t{-1}),
            0)
      << "the survivor let kept batches go: a lost reply would open its round afresh";
  if (HasFailure()) {
    for (size_t i = 0; i < consumers.size(); ++i) {
      std::cerr << "consumer " << i << " said:\n" << consumers[i]->stderr_text();
    }
  }
}

// A consumer that dies stalls the others for about one round wait (1 s here), not for every
// round after it (which at one round a second would look like a hang).
TEST(CoordinatedReadsTest, ConsumersGoOnWhenAConsumerDies) {
  Cluster cluster({.workers = 2, .dispatcher_args = {"--round-wait", "1s"}});
  constexpr int kTake = 2000;
  std::vector<std::unique_ptr<Subprocess>> consumers;
  ASSERT_NO_FATAL_FAILURE(StartConsumersAndAwaitARound(cluster.address(), kTake, &consumers));
  consumers.back()->Kill(SIGKILL);
  consumers.back()->Wait(absl::Seconds(10));
  consumers.pop_back();
  const absl::Time killed = absl::Now();
  std::vector<std::map<int64_t, Line>> per_consumer = RoundsOfAll(consumers, kTake);
  EXPECT_LT(absl::Now() - killed, absl::Seconds(30)) << "the survivors stalled";
  std::set<std::string> workers;
  EXPECT_EQ(CheckRounds(per_consumer, &workers), kTake) << "the survivors got every round";
  EXPECT_EQ(workers.size(), 2u);
}

// A consumer killed and started again (a trainer process restarted) joins the others where
// they are. Before, it started at round 0, which the others had left long ago, and read
// every round since on its own (34 s here, most of it after the others had finished).
TEST(CoordinatedReadsTest, ARestartedConsumerRejoinsTheRounds) {
  Cluster cluster({.workers = 2, .dispatcher_args = {"--round-wait", "1s"}});
  // The restarted consumer must register before the others finish, or it finds no live
  // consumer to join and starts at 0: 3000 rounds past round 1000 gave it about a second.
  constexpr int kTake = 16000;
  // Batches that never repeat: a latecomer's batch of a round (the next one of the worker's)
  // must not look like another consumer's.
  const std::string pipeline = "range(100000000) | batch(8) | repeat()";
  std::vector<std::unique_ptr<Subprocess>> consumers =
      StartConsumers(cluster.address(), kTake, pipeline);
  ASSERT_FALSE(consumers[0]->WaitForOutput("round", absl::Seconds(30)).empty())
      << consumers[0]->stderr_text();
  consumers.back()->Kill(SIGKILL);
  consumers.back()->Wait(absl::Seconds(10));
  consumers.pop_back();
  // The others go on without it (after one round wait) for a while.
  ASSERT_FALSE(consumers[0]->WaitForOutput("\"round\":1000,", absl::Seconds(60)).empty())
      << consumers[0]->stderr_text();
  consumers.push_back(StartRead(cluster.address(), pipeline, "off", "coordinated",
                                {"--num-consumers", std::to_string(kConsumers), "--consumer-index",
                                 std::to_string(kConsumers - 1), "--take", std::to_string(kTake)}));
  const absl::Time restarted = absl::Now();
  std::vector<std::map<int64_t, Line>> per_consumer = RoundsOfAll(consumers, kTake);
  EXPECT_LT(absl::Now() - restarted, absl::Seconds(60)) << "the restarted consumer crawled";
  const std::map<int64_t, Line>& rejoined = per_consumer.back();
  ASSERT_FALSE(rejoined.empty());
  EXPECT_GE(rejoined.begin()->first, 1000) << "it starts where the others were";
  EXPECT_GE(rejoined.rbegin()->first, kTake - 2) << "and reads to the end with them";
  std::set<std::string> workers;
  CheckRounds(per_consumer, &workers);  // one worker per round, a distinct batch each
}

// The newcomer enters about DispatcherState::kRoundWindow (1024) rounds past where the
// consumers are when it registers, so the read must outlast its start-up by that much.
// At about 4,000 rounds/s (one worker, old and new binaries alike) 4000 rounds left it under
// a second, and a CI run over libfabric tcp ended before the newcomer's first round.
TEST(CoordinatedReadsTest, AWorkerJoiningMidJobEntersAtARoundAllAgreeOn) {
  Cluster cluster(1);
  constexpr int kTake = 16000;
  std::vector<std::unique_ptr<Subprocess>> consumers;
  ASSERT_NO_FATAL_FAILURE(StartConsumersAndAwaitARound(cluster.address(), kTake, &consumers));
  cluster.AddWorker();
  std::vector<std::map<int64_t, Line>> per_consumer = RoundsOfAll(consumers, kTake);
  std::set<std::string> workers;
  EXPECT_EQ(CheckRounds(per_consumer, &workers), kTake) << "no round skipped or split";
  EXPECT_EQ(workers.size(), 2u) << "the new worker joined the rotation";
  int64_t first_round_of_newcomer = -1;
  for (const auto& [round, line] : per_consumer[0]) {
    if (line.worker == cluster.worker_address(1)) {
      first_round_of_newcomer = round;
      break;
    }
  }
  EXPECT_GT(first_round_of_newcomer, 0) << "it enters after the rounds already handed out";
}

// A fault-tolerant dispatcher killed mid-read: the consumers go on with the rotation they
// were told, and a worker joining after the restart enters at a round all of them agree
// on, so no round is skipped or split across workers. (The race the journaled horizon
// closes, a worker registering before any consumer heartbeat reached the restarted
// dispatcher, is too narrow to hit from here: DispatcherRecoveryTest drives it.)
TEST(CoordinatedReadsTest, ConsumersGoOnAcrossADispatcherRestart) {
  ScopedTempDir work_dir;
  Cluster cluster(
      {.workers = 2, .dispatcher_args = {"--work-dir", work_dir.path(), "--fault-tolerant"}});
  // The newcomer enters after the journaled horizon, up to two windows (2048 rounds) past
  // the consumers, and must start after the restart too: read well beyond that (6000 left
  // about a second at 2,000-3,500 rounds/s).
  constexpr int kTake = 20000;
  std::vector<std::unique_ptr<Subprocess>> consumers;
  ASSERT_NO_FATAL_FAILURE(StartConsumersAndAwaitARound(cluster.address(), kTake, &consumers));
  cluster.RestartDispatcher();
  cluster.AddWorker();
  std::vector<std::map<int64_t, Line>> per_consumer = RoundsOfAll(consumers, kTake);
  EXPECT_THAT(cluster.dispatcher().stdout_text(), HasSubstr("recovered"));
  std::set<std::string> workers;
  EXPECT_EQ(CheckRounds(per_consumer, &workers), kTake) << "no round skipped or split";
  EXPECT_EQ(workers.size(), 3u) << "the worker that joined after the restart serves rounds";
}

// DYNAMIC coordinated reads with a worker killed mid-read: the splits it had leased go to a
// recovery task in the rotation, less what consumers received, so every split it touched is
// read whole and nothing twice (they used to be dropped with the worker).
TEST(CoordinatedReadsTest, AKilledWorkersSplitsAreReadByTheOthersInDynamicMode) {
  Cluster cluster({.workers = 2, .dispatcher_args = {"--worker-timeout", "2s"}});
  // Rounds past the kill: the loss is seen after --worker-timeout, the recovery enters
  // after the horizon (1024 rounds ahead), and then serves every other round until the
  // dead worker's leases are read. 5000 rounds left that about a second of margin.
  constexpr int kTake = 16000;
  constexpr int64_t kElementsPerSplit = 100;  // Cluster starts the dispatcher with it
  std::vector<std::unique_ptr<Subprocess>> consumers = StartConsumers(
      cluster.address(), kTake, "range(100000000) | batch(8) | repeat()", {}, "dynamic");
  ASSERT_FALSE(consumers[0]->WaitForOutput("\"round\":200,", absl::Seconds(60)).empty())
      << consumers[0]->stderr_text();
  cluster.KillWorker(0);
  std::vector<std::map<int64_t, Line>> per_consumer = RoundsOfAll(consumers, kTake);
  std::set<std::string> workers;
  CheckRounds(per_consumer, &workers);
  std::map<int64_t, int> times;          // value -> deliveries
  std::set<int64_t> splits_of_the_dead;  // splits the killed worker delivered from
  for (const auto& rounds : per_consumer) {
    for (const auto& [round, line] : rounds) {
      for (int64_t value : line.values) {
        ++times[value];
        if (line.worker == cluster.worker_address(0)) {
          splits_of_the_dead.insert(value / kElementsPerSplit);
        }
      }
    }
  }
  for (const auto& [value, count] : times) EXPECT_EQ(count, 1) << "value " << value;
  ASSERT_FALSE(splits_of_the_dead.empty());
  int64_t missing = 0;
  for (int64_t split : splits_of_the_dead) {
    for (int64_t v = split * kElementsPerSplit; v < (split + 1) * kElementsPerSplit; ++v) {
      missing += times.contains(v) ? 0 : 1;
    }
  }
  EXPECT_EQ(missing, 0) << "elements of the dead worker's splits never read, of "
                        << splits_of_the_dead.size() * kElementsPerSplit;
}

// A worker joining a DYNAMIC coordinated job whose passes are short: by the time it leases,
// the others have read (and pruned) the early passes. It used to find its first pass empty,
// which ended its repeat(), and every consumer failed on "need an infinite pipeline".
TEST(CoordinatedReadsTest, AWorkerJoiningADynamicJobLeasesFromTheCurrentPass) {
  Cluster cluster(1);
  constexpr int kTake = 16000;  // the newcomer enters ~1024 rounds ahead (see above)
  std::vector<std::unique_ptr<Subprocess>> consumers =
      StartConsumers(cluster.address(), kTake, kPipeline, {}, "dynamic");
  ASSERT_FALSE(consumers[0]->WaitForOutput("\"round\":100,", absl::Seconds(60)).empty())
      << consumers[0]->stderr_text();
  cluster.AddWorker();
  std::vector<std::map<int64_t, Line>> per_consumer = RoundsOfAll(consumers, kTake);
  std::set<std::string> workers;
  EXPECT_EQ(CheckRounds(per_consumer, &workers), kTake) << "no round skipped or split";
  EXPECT_EQ(workers.size(), 2u) << "the new worker serves rounds";
}

TEST(CoordinatedReadsTest, FiniteJobsAndMissingNamesAreRefused) {
  Cluster cluster(1);
  auto finite = StartRead(cluster.address(), "range(100) | batch(8)", "off", "coordinated",
                          {"--num-consumers", "2", "--consumer-index", "0"});
  EXPECT_NE(finite->Wait(absl::Seconds(30)), 0);
  EXPECT_THAT(finite->stderr_text(), HasSubstr("need an infinite pipeline"));
  auto unnamed = StartRead(cluster.address(), kPipeline, "off", "",
                           {"--num-consumers", "2", "--consumer-index", "0"});
  EXPECT_NE(unnamed->Wait(absl::Seconds(30)), 0);
  EXPECT_THAT(unnamed->stderr_text(), HasSubstr("need a job name"));
}

}  // namespace
}  // namespace sluice::testing
