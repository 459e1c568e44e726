#include "tools/worker_loss_notice.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace sluice::tools {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(WorkerLostNoticeTest, SaysWhatTheLossCostsInEachMode) {
  const std::string worker = "ucx://10.0.0.2:7001";
  EXPECT_THAT(WorkerLostNotice(proto::DYNAMIC, false, worker), HasSubstr("nothing is lost"));
  EXPECT_THAT(WorkerLostNotice(proto::OFF, false, worker), HasSubstr("ends short"));
  for (proto::ProcessingMode mode : {proto::FILE, proto::DATA, proto::FILE_OR_DATA, proto::HINT}) {
    EXPECT_THAT(WorkerLostNotice(mode, false, worker), HasSubstr("waits until it is back"));
  }
  EXPECT_THAT(WorkerLostNotice(proto::OFF, false, worker), HasSubstr(worker));
}

TEST(WorkerLostNoticeTest, CoordinatedReadsAreToldTheyLoseRounds) {
  EXPECT_THAT(WorkerLostNotice(proto::DYNAMIC, true, "w"), HasSubstr("skips its rounds"));
  EXPECT_THAT(WorkerLostNotice(proto::DYNAMIC, false, "w"), Not(HasSubstr("rounds")));
}

TEST(WorkerAwaitedNoticeTest, NamesTheWorkerAndHowToStartIt) {
  const std::string notice = WorkerAwaitedNotice("127.0.0.1:7002");
  EXPECT_THAT(notice, HasSubstr("waiting for worker 127.0.0.1:7002"));
  EXPECT_THAT(notice, HasSubstr("--worker-addresses"));
  EXPECT_THAT(notice, HasSubstr("start `sluice worker`"));
}

TEST(CutShortNoticeTest, OnlyAnOffReadThatLostATaskEndsShort) {
  EXPECT_EQ(CutShortNotice(proto::OFF, 0), std::nullopt);
  EXPECT_EQ(CutShortNotice(proto::DYNAMIC, 2), std::nullopt);
  EXPECT_EQ(CutShortNotice(proto::FILE, 1), std::nullopt);
  ASSERT_TRUE(CutShortNotice(proto::OFF, 1).has_value());
  EXPECT_THAT(*CutShortNotice(proto::OFF, 1), HasSubstr("1 pass ended short"));
  EXPECT_THAT(*CutShortNotice(proto::OFF, 2), HasSubstr("2 passes ended short"));
}

}  // namespace
}  // namespace sluice::tools
