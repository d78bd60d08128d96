#include "pipelining/schedule_csv.h"

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ipuflow::pipelining {
namespace {

using ::testing::HasSubstr;

ScheduleTable Make(PipelineSchedule kind, int n, std::vector<int> mapping,
                   int m, bool training = true) {
  absl::StatusOr<ScheduleTable> table =
      MakeSchedule(kind, n, mapping, m, training);
  EXPECT_TRUE(table.ok()) << table.status();
  return *table;
}

std::string Error(const std::string& csv) {
  absl::StatusOr<ScheduleTable> t = ScheduleTableFromCsv(csv);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << csv;
  return std::string(t.status().message());
}

TEST(ScheduleCsvTest, WritesTorchsComputeOnlyForm) {
  EXPECT_EQ(ScheduleTableToCsv(Make(PipelineSchedule::k1F1B, 2, {}, 4)),
            "0F0,0F1,,0B0,0F2,0B1,0F3,0B2,,0B3\n"
            ",1F0,1B0,1F1,1B1,1F2,1B2,1F3,1B3,\n");
  // Grouped runs F and B of one IPU in a step: two columns for that step.
  EXPECT_EQ(ScheduleTableToCsv(Make(PipelineSchedule::kGrouped, 2, {}, 2)),
            "0F0,0F1,,,0B0,0B1\n"
            ",1F0,1F1,1B0,1B1,\n");
}

TEST(ScheduleCsvTest, RoundTripKeepsEveryIpusOrder) {
  for (PipelineSchedule kind :
       {PipelineSchedule::kGrouped, PipelineSchedule::kInterleaved,
        PipelineSchedule::kSequential, PipelineSchedule::kGPipe,
        PipelineSchedule::k1F1B, PipelineSchedule::kInterleaved1F1B,
        PipelineSchedule::kLoopedBFS}) {
    for (bool training : {true, false}) {
      const bool looped = IsLoopedSchedule(kind);
      ScheduleTable t = Make(
          kind, 4, looped ? std::vector<int>{0, 1, 0, 1} : std::vector<int>{},
          looped ? 4 : 6, training);
      absl::StatusOr<ScheduleTable> back =
          ScheduleTableFromCsv(ScheduleTableToCsv(t));
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(back->kind, PipelineSchedule::kCustom);
      EXPECT_EQ(back->stage_ipu, t.stage_ipu);
      EXPECT_EQ(back->micro_batches, t.micro_batches);
      EXPECT_EQ(back->training, t.training);
      for (int ipu = 0; ipu < t.num_ipus; ++ipu) {
        EXPECT_EQ(ItemsOnIpu(*back, ipu), ItemsOnIpu(t, ipu))
            << PipelineScheduleName(kind) << " IPU " << ipu;
      }
      // torch's schedules are dataflow replays already: the same table.
      if (kind != PipelineSchedule::kGrouped &&
          kind != PipelineSchedule::kInterleaved &&
          kind != PipelineSchedule::kSequential) {
        EXPECT_EQ(back->steps, t.steps) << PipelineScheduleName(kind);
      }
    }
  }
}

TEST(ScheduleCsvTest, ReadsTheComputeAndCommunicationForm) {
  // torch's _add_send_recv output for 1F1B, 2 stages, 2 micro-batches.
  const std::string csv =
      "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\r\n"
      "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\r\n";
  absl::StatusOr<ScheduleTable> t = ScheduleTableFromCsv(csv);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(ScheduleTableToString(*t),
            "IPU0 | F0 F1 .  B0 .  B1\n"
            "IPU1 | .  F0 B0 F1 B1 .\n");
  EXPECT_TRUE(VerifyScheduleTable(*t).ok());
}

TEST(ScheduleCsvTest, IdleCellsAndSpacesAreIgnored) {
  absl::StatusOr<ScheduleTable> t =
      ScheduleTableFromCsv(" 0F0 ,,,,0B0\n,,1F0, 1B0\n");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(ScheduleTableToString(*t),
            "IPU0 | F0 .  .  B0\nIPU1 | .  F0 B0 .\n");
}

TEST(ScheduleCsvTest, HandBrokenCsvsAreRefusedNamingTheRule) {
  // A missing item.
  EXPECT_THAT(Error("0F0,0F1,0B0\n,1F0,1B0,1F1,1B1\n"),
              HasSubstr("0B1 is missing: no row runs it (row 0 has stage 0)"));
  // An unknown action, the split backward, FSDP.
  EXPECT_THAT(Error("0F0,0X0\n"),
              HasSubstr("row 0, column 1 ('0X0'): unknown action X"));
  EXPECT_THAT(Error("0F0\n1F0,1I0,1W0\n"),
              HasSubstr("row 1, column 1 ('1I0'): action I (backward input) "
                        "is the split backward"));
  EXPECT_THAT(Error("0F0\n1F0,1I0,1W0\n"),
              HasSubstr("row 1, column 2 ('1W0'): action W"));
  EXPECT_THAT(Error("0UNSHARD,0F0\n"),
              HasSubstr("row 0, column 0 ('0UNSHARD'): action UNSHARD"));
  EXPECT_THAT(Error("F0\n"), HasSubstr("row 0, column 0 ('F0'): not an "
                                       "action: an action is [stage]"));
  EXPECT_THAT(Error("0F\n"), HasSubstr("action F needs a micro-batch number"));
  // A stage on two IPUs.
  EXPECT_THAT(Error("0F0,1F0,1B0,0B0\n,,,,1F1\n"),
              HasSubstr("row 1, column 4 ('1F1'): stage 1 is on two IPUs, "
                        "rows 0 and 1"));
  EXPECT_THAT(Error("0F0,1RECV_F0,0B0\n1F0,1B0\n"),
              HasSubstr("row 0, column 1 ('1RECV_F0'): a send or receive of "
                        "stage 1 on row 0; stage 1 runs on row 1"));
  // B before F: the replay cannot run it.
  EXPECT_THAT(Error("0B0,0F0\n1F0,1B0\n"),
              HasSubstr("row 0, column 0 ('0B0'): deadlock: waits for 0F0 "
                        "(row 0, column 1), which never runs"));
  EXPECT_THAT(Error("0B0,0F0\n1F0,1B0\n"),
              HasSubstr("row 1, column 0 ('1F0'): deadlock: waits for 0F0 "
                        "(row 0, column 1)"));
  // Unmatched sends and receives.
  EXPECT_THAT(Error("0F0,0SEND_F0,0B0\n1F0,1B0,1SEND_B0\n"),
              HasSubstr("row 0, column 1 ('0SEND_F0'): unmatched send: no row "
                        "has 1RECV_F0"));
  EXPECT_THAT(Error("0F0,0SEND_F0,0B0\n1F0,1B0,1SEND_B0\n"),
              HasSubstr("row 1, column 2 ('1SEND_B0'): unmatched send: no row "
                        "has 0RECV_B0"));
  EXPECT_THAT(Error("0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0\n"),
              HasSubstr("row 0, column 2 ('0RECV_B0'): unmatched receive: no "
                        "row has 1SEND_B0"));
  EXPECT_THAT(Error("0RECV_F0,0F0,0B0\n"),
              HasSubstr("row 0, column 0 ('0RECV_F0'): a send or receive with "
                        "no partner stage"));
  // A receive after the action that needs it, a send before its result.
  EXPECT_THAT(
      Error("0SEND_F0,0F0,0RECV_B0,0B0\n1F0,1RECV_F0,1B0,1SEND_B0\n"),
      HasSubstr("row 1, column 1 ('1RECV_F0'): receives after 1F0 (column 0)"));
  EXPECT_THAT(
      Error("0SEND_F0,0F0,0RECV_B0,0B0\n1F0,1RECV_F0,1B0,1SEND_B0\n"),
      HasSubstr("row 0, column 0 ('0SEND_F0'): sends before 0F0 (column 1)"));
  // A receive order that deadlocks although the compute order would not.
  EXPECT_THAT(Error("0F0,0SEND_F0,0RECV_B0,0F1,0SEND_F1,0B0,0RECV_B1,0B1\n"
                    "1RECV_F0,1F0,1RECV_F1,1F1,1B0,1SEND_B0,1B1,1SEND_B1\n"),
              HasSubstr("row 0, column 2 ('0RECV_B0'): deadlock: waits for "
                        "1SEND_B0 (row 1, column 5)"));
  // Backwards out of micro-batch order (torch's LoopedBFS writes these).
  EXPECT_THAT(Error("0F0,0F1,,,0B1,0B0\n,1F0,1F1,1B1,1B0\n"),
              HasSubstr("row 1, column 4 ('1B0'): comes after micro-batch 1 "
                        "of its stage and pass: a stage runs its "
                        "micro-batches in ascending order"));
  // Everything at once.
  EXPECT_THAT(Error("0F0,0Q0,0Z1\n"), HasSubstr("2 error(s)"));
}

TEST(ScheduleCsvTest, ReadsAFile) {
  const char* dir = std::getenv("TEST_TMPDIR");
  ASSERT_NE(dir, nullptr);
  const std::string path = absl::StrCat(dir, "/gpipe.csv");
  const ScheduleTable t = Make(PipelineSchedule::kGPipe, 3, {}, 3);
  std::ofstream(path) << ScheduleTableToCsv(t);
  absl::StatusOr<ScheduleTable> back = ScheduleTableFromCsvFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->steps, t.steps);
  std::ofstream(path) << "0F0,0Q0\n";
  EXPECT_THAT(ScheduleTableFromCsvFile(path).status().message(),
              HasSubstr(absl::StrCat(path,
                                     ": schedule CSV: 1 error(s):\n  "
                                     "row 0, column 1 ('0Q0'): unknown "
                                     "action Q")));
}

TEST(ScheduleCsvTest, HostileSizesAreBounded) {
  EXPECT_THAT(Error("99999999999F0\n"),
              HasSubstr("the stage number is larger than 16777215"));
  EXPECT_THAT(Error("0F16777216\n"),
              HasSubstr("the micro-batch number is larger than 16777215"));
  EXPECT_THAT(Error("0F0,5000B5000\n"),
              HasSubstr("5001 stages x 5001 micro-batches x 2 passes = "
                        "50020002 items; the limit is 16777216"));
  EXPECT_THAT(Error(std::string(kMaxScheduleCsvBytes + 1, ',')),
              HasSubstr("67108865 bytes; the limit is 67108864"));
  EXPECT_THAT(Error(std::string(2000, '\n')),
              HasSubstr("2000 rows; a row is an IPU, at most 1024"));
  EXPECT_THAT(Error(std::string(40, '1')),
              HasSubstr("a cell of 40 characters is not an action"));
  EXPECT_THAT(Error(""), HasSubstr("no F or B action"));
  EXPECT_THAT(Error("0F0,\x01\xff\n"), HasSubstr("'\\x01\\xff'"));
  EXPECT_THAT(
      ScheduleTableFromCsvFile("/nonexistent/schedule.csv").status().message(),
      HasSubstr("'/nonexistent/schedule.csv' cannot be opened"));
}

}  // namespace
}  // namespace ipuflow::pipelining
