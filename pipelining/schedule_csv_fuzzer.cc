// Fuzz target: torch's schedule CSV through ScheduleTableFromCsv. What it
// accepts is a valid table, and writing it and reading it back keeps every
// IPU's order and the table.
#include <string>

#include "core/status.h"
#include "core/testing/fuzz.h"
#include "pipelining/schedule_csv.h"

IPUFLOW_FUZZ_TARGET(schedule_csv) {
  using namespace ipuflow::pipelining;  // NOLINT: a fuzz target's body.
  const std::string csv(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ScheduleTable> table = ScheduleTableFromCsv(csv);
  if (!table.ok()) {
    IPU_CHECK(table.status().code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  IPU_CHECK_OK(VerifyScheduleTable(*table));
  absl::StatusOr<ScheduleTable> back =
      ScheduleTableFromCsv(ScheduleTableToCsv(*table));
  IPU_CHECK_OK(back.status());
  IPU_CHECK(back->steps == table->steps);
  IPU_CHECK(back->stage_ipu == table->stage_ipu);
}
