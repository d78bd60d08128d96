#include "core/checkpoint/process_parts.h"

#include <filesystem>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/status.h"

namespace ipuflow::checkpoint {
namespace {

// The link's tags of the commit's meetings (the same on every process).
constexpr uint64_t kPartsWrittenTag = 0xC4EC0001;
constexpr uint64_t kCommittedTag = 0xC4EC0002;
constexpr uint64_t kDirectoryCheckedTag = 0xC4EC0004;

std::string PartOf(const std::string& path, int process, int processes) {
  return absl::StrFormat("%s.part-%d-of-%d", path, process, processes);
}

// Every process's `mine` ("" for OK, else "<code> <message>"); the first
// failure, with its code, as this process's error, naming its process.
absl::Status Meet(ProcessLink& link, uint64_t tag, const absl::Status& mine,
                  const std::string& what) {
  ASSIGN_OR_RETURN(
      std::vector<std::string> all,
      link.AllGatherStrings(
          tag, mine.ok() ? ""
                         : absl::StrCat(static_cast<int>(mine.code()), " ",
                                        mine.message())));
  for (size_t p = 0; p < all.size(); ++p) {
    if (all[p].empty()) continue;
    const size_t space = all[p].find(' ');
    int code = static_cast<int>(absl::StatusCode::kInternal);
    if (space == std::string::npos ||
        !absl::SimpleAtoi(absl::string_view(all[p]).substr(0, space), &code) ||
        code <= 0 ||
        code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
      code = static_cast<int>(absl::StatusCode::kInternal);
    }
    return absl::Status(
        static_cast<absl::StatusCode>(code),
        absl::StrCat("checkpoint: process ", p, " ", what, ": ",
                     space == std::string::npos
                         ? absl::string_view(all[p])
                         : absl::string_view(all[p]).substr(space + 1)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> WriteProcessCheckpoint(
    const std::string& dir, int64_t step, const CheckpointContents& c,
    int keep_last, ProcessLink& link, const WriteOptions& options) {
  const int me = link.process_index(), processes = link.process_count();
  const Manifest& m = c.manifest;
  // Any failure before the first meeting is told to the others there.
  absl::Status written;
  if (m.part().process() != me || m.part().processes() != processes ||
      m.topology().processes() != processes) {
    written = absl::InvalidArgumentError(
        absl::StrCat("WriteProcessCheckpoint: the contents are process ",
                     m.part().process(), "'s of ", m.part().processes(),
                     " (topology: ", m.topology().processes(),
                     " processes), this is process ", me, " of ", processes));
  } else if (c.tensors.size() != static_cast<size_t>(m.tensors_size())) {
    written = absl::InvalidArgumentError(
        absl::StrCat("WriteProcessCheckpoint: ", m.tensors_size(),
                     " tensor entries but ", c.tensors.size(), " tensors"));
  } else if (keep_last < 1 || step < 0 || step > 999999999999) {
    written = absl::InvalidArgumentError(
        absl::StrCat("WriteProcessCheckpoint: keep_last ", keep_last,
                     " (at least 1), step ", step, " (0 to 999999999999)"));
  }
  // Process 0 checks the directory before any part is written: a part of
  // another run's checkpoint at this step would otherwise be overwritten.
  if (written.ok() && me == 0) {
    written = CheckCheckpointDirectory(dir, m.run_id(), step);
  }
  RETURN_IF_ERROR(Meet(link, kDirectoryCheckedTag, written,
                       absl::StrCat("refused checkpoint ", step)));
  if (written.ok()) {
    // The part: this process's replicas' tensors, streams and positions.
    CheckpointContents part;
    part.manifest = m;
    part.manifest.mutable_steps()->set_weight_updates(step);
    part.manifest.clear_tensors();
    for (int i = 0; i < m.tensors_size(); ++i) {
      if (m.tensors(i).replica() < 0) continue;
      *part.manifest.add_tensors() = m.tensors(i);
      part.tensors.push_back(c.tensors[i]);
    }
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      written = absl::InternalError(
          absl::StrCat("checkpoint directory '", dir,
                       "' cannot be created: ", ec.message()));
    } else {
      written = WriteCheckpointFile(ProcessPartPath(dir, step, me, processes),
                                    &part, options);
    }
  }
  const std::string path = NumberedCheckpointPath(dir, step);
  RETURN_IF_ERROR(
      Meet(link, kPartsWrittenTag, written,
           absl::StrCat("could not write its part of checkpoint ", step,
                        " (the previous checkpoint stays "
                        "the newest)")));

  // Every part is on disk: process 0 commits.
  absl::Status committed;
  if (me == 0) {
    CheckpointContents shared;
    shared.manifest = m;
    shared.manifest.mutable_steps()->set_weight_updates(step);
    shared.manifest.clear_tensors();
    shared.manifest.clear_infeeds();
    shared.manifest.clear_loaders();
    shared.manifest.mutable_random()->clear_programs();
    shared.manifest.mutable_part()->set_process(-1);
    for (int i = 0; i < m.tensors_size(); ++i) {
      if (m.tensors(i).replica() >= 0) continue;
      *shared.manifest.add_tensors() = m.tensors(i);
      shared.tensors.push_back(c.tensors[i]);
    }
    committed = WriteCheckpointFile(path, &shared, options);
    if (committed.ok()) {
      committed = RemoveOldCheckpoints(dir, keep_last, step);
    }
  }
  RETURN_IF_ERROR(Meet(link, kCommittedTag, committed,
                       absl::StrCat("could not commit checkpoint ", step)));
  return path;
}

absl::StatusOr<CheckpointContents> ReadCheckpoint(const std::string& path,
                                                  int process_index,
                                                  int process_count) {
  ASSIGN_OR_RETURN(CheckpointContents c, ReadCheckpointFile(path));
  const int saved = c.manifest.topology().processes();
  if (saved != process_count) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint '", path, "' was saved by ", saved,
                     " process(es); this run has ", process_count,
                     ": restore with the process count it was saved with"));
  }
  if (process_count == 1 && !c.manifest.has_part()) return c;
  const ProcessPart& shared = c.manifest.part();
  if (shared.process() != -1 || shared.processes() != saved) {
    return absl::DataLossError(
        absl::StrCat("checkpoint '", path, "': its manifest names process ",
                     shared.process(), " of ", shared.processes(),
                     " where the shared file (-1 of ", saved, ") belongs"));
  }
  const std::string part_path = PartOf(path, process_index, process_count);
  absl::StatusOr<CheckpointContents> part = ReadCheckpointFile(part_path);
  if (!part.ok()) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint '", path, "': the part of process ", process_index,
        " cannot be read: ", part.status().message()));
  }
  const Manifest& pm = part->manifest;
  if (pm.part().process() != process_index ||
      pm.part().processes() != process_count ||
      pm.part().checkpoint_id() != shared.checkpoint_id() ||
      pm.model_fingerprint() != c.manifest.model_fingerprint() ||
      pm.steps().weight_updates() != c.manifest.steps().weight_updates()) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint '", part_path, "' is not a part of '", path, "': process ",
        pm.part().process(), " of ", pm.part().processes(), ", id ",
        absl::Hex(pm.part().checkpoint_id()), ", weight update ",
        pm.steps().weight_updates(), " where the shared file has id ",
        absl::Hex(shared.checkpoint_id()), ", weight update ",
        c.manifest.steps().weight_updates()));
  }
  // The view: the shared file's manifest and tensors, then the part's.
  *c.manifest.mutable_part() = pm.part();
  *c.manifest.mutable_random()->mutable_programs() = pm.random().programs();
  *c.manifest.mutable_infeeds() = pm.infeeds();
  *c.manifest.mutable_loaders() = pm.loaders();
  for (int i = 0; i < pm.tensors_size(); ++i) {
    *c.manifest.add_tensors() = pm.tensors(i);
    c.tensors.push_back(part->tensors[i]);
  }
  return c;
}

}  // namespace ipuflow::checkpoint
