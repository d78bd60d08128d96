#include "core/command_line.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ipuflow {
namespace {

using ::testing::ElementsAre;

TEST(CommandLineTest, DashesToUnderscoresRewritesFlagNamesOnly) {
  EXPECT_THAT(DashesToUnderscores({"plan-pipeline", "--device-mapping=0-1",
                                   "--stages=4", "-x-y", "--no-training"}),
              ElementsAre("plan-pipeline", "--device_mapping=0-1", "--stages=4",
                          "-x-y", "--no_training"));
}

TEST(CommandLineTest, ResolveOutputPath) {
  EXPECT_EQ(ResolveOutputPath("a.svg", "/home/me"), "/home/me/a.svg");
  EXPECT_EQ(ResolveOutputPath("/tmp/a.svg", "/home/me"), "/tmp/a.svg");
  EXPECT_EQ(ResolveOutputPath("a.svg", ""), "a.svg");
  EXPECT_EQ(ResolveOutputPath("", "/home/me"), "");
}

}  // namespace
}  // namespace ipuflow
