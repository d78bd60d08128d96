#include "core/checkpoint/checkpoint_directory.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/status.h"

namespace ipuflow::checkpoint {

std::string NumberedCheckpointPath(const std::string& dir, int64_t step) {
  return absl::StrFormat("%s/ckpt-%012d.ipuckpt", dir, step);
}

std::string ProcessPartPath(const std::string& dir, int64_t step, int process,
                            int processes) {
  return absl::StrFormat("%s.part-%d-of-%d", NumberedCheckpointPath(dir, step),
                         process, processes);
}

namespace {
constexpr absl::string_view kPrefix = "ckpt-", kSuffix = ".ipuckpt";
constexpr size_t kNumberedSize = kPrefix.size() + 12 + kSuffix.size();

// The step of a file that belongs to a numbered checkpoint (the file
// itself, "<it>.part-...", "<it>.tmp-..."), or -1; `rest` gets what follows
// the checkpoint's name ("" for the committed file).
int64_t StepOfAny(const std::string& name, std::string* rest) {
  if (name.size() < kNumberedSize || !absl::StartsWith(name, kPrefix) ||
      name.compare(kPrefix.size() + 12, kSuffix.size(), kSuffix.data(),
                   kSuffix.size()) != 0) {
    return -1;
  }
  int64_t step;
  const std::string digits = name.substr(kPrefix.size(), 12);
  if (!std::all_of(digits.begin(), digits.end(), ::isdigit) ||
      !absl::SimpleAtoi(digits, &step)) {
    return -1;
  }
  *rest = name.substr(kNumberedSize);
  if (!rest->empty() && !absl::StartsWith(*rest, ".part-") &&
      !absl::StartsWith(*rest, ".tmp-")) {
    return -1;
  }
  return step;
}

// The step of a committed numbered checkpoint's file name, or -1.
int64_t StepOf(const std::string& name) {
  std::string rest;
  const int64_t step = StepOfAny(name, &rest);
  return rest.empty() ? step : -1;
}
}  // namespace

namespace {

// Committed numbered checkpoints by file name, oldest first.
absl::StatusOr<std::vector<std::pair<int64_t, std::string>>> ListByName(
    const std::string& dir) {
  std::error_code ec;
  std::vector<std::pair<int64_t, std::string>> out;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    const int64_t step = StepOf(it->path().filename().string());
    if (step >= 0) out.push_back({step, it->path().string()});
  }
  if (ec) {
    return absl::NotFoundError(absl::StrCat(
        "checkpoint directory '", dir, "' cannot be listed: ", ec.message()));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string RunName(uint64_t run_id) {
  return absl::StrCat("run ", absl::Hex(run_id, absl::kZeroPad16));
}

struct Listed {
  int64_t step;
  std::string path;
  uint64_t run_id;
};

// The committed checkpoints of `dir`, oldest first, each one's manifest
// read: a file is a checkpoint by its contents, not by its name alone (a
// stray "ckpt-000000000099.ipuckpt" would otherwise be the newest, and
// keep-last-K would remove real checkpoints for it).
absl::StatusOr<std::vector<Listed>> ListChecked(const std::string& dir) {
  ASSIGN_OR_RETURN(auto named, ListByName(dir));
  std::vector<Listed> out;
  for (const auto& [step, path] : named) {
    absl::StatusOr<Manifest> m = ReadCheckpointManifest(path);
    if (!m.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint directory '", dir, "': '", path,
          "' is named as a checkpoint but is not one this build reads (",
          m.status().message(),
          "); nothing is saved, removed or resumed by a file name alone: "
          "remove that file, or use another directory"));
    }
    if (m->steps().weight_updates() != step) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint directory '", dir, "': '", path, "' holds weight update ",
          m->steps().weight_updates(), ", not its name's ", step,
          " (a renamed or copied file): remove or rename it"));
    }
    out.push_back({step, path, m->run_id()});
  }
  for (const Listed& l : out) {
    if (l.run_id != out.front().run_id) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint directory '", dir,
          "' holds checkpoints of two runs: ", RunName(out.front().run_id),
          " ('", out.front().path, "') and ", RunName(l.run_id), " ('", l.path,
          "'); which is the newest is not defined across runs: move one "
          "run's checkpoints to a directory of their own"));
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::pair<int64_t, std::string>>> ListCheckpoints(
    const std::string& dir) {
  ASSIGN_OR_RETURN(std::vector<Listed> all, ListChecked(dir));
  std::vector<std::pair<int64_t, std::string>> out;
  for (Listed& l : all) out.push_back({l.step, std::move(l.path)});
  return out;
}

absl::StatusOr<std::string> LatestCheckpoint(const std::string& dir) {
  ASSIGN_OR_RETURN(auto all, ListCheckpoints(dir));
  if (all.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no checkpoint (ckpt-<step>.ipuckpt) in '", dir, "'"));
  }
  return all.back().second;
}

absl::Status CheckCheckpointDirectory(const std::string& dir, uint64_t run_id,
                                      int64_t step) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::vector<Listed> all, ListChecked(dir));
  if (all.empty()) return absl::OkStatus();
  const Listed& newest = all.back();
  if (newest.run_id != run_id) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint directory '", dir, "' holds checkpoints of another run (",
        RunName(newest.run_id), "; its newest, '", newest.path,
        "', at weight update ", newest.step, "); this is ", RunName(run_id),
        ": save into a fresh directory, or continue that run by resuming "
        "from its newest checkpoint (Restore; the example's --resume)"));
  }
  if (newest.step > step) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint directory '", dir, "' holds '", newest.path,
        "' of this run at weight update ", newest.step, ", after ", step,
        ": a save never goes behind the newest checkpoint of its directory "
        "(this run was resumed from an older one); save into a fresh "
        "directory, or remove the checkpoints after weight update ",
        step));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> WriteNumberedCheckpoint(
    const std::string& dir, int64_t step, CheckpointContents* contents,
    int keep_last, const WriteOptions& options) {
  if (keep_last < 1 || step < 0 || step > 999999999999) {
    return absl::InvalidArgumentError(
        absl::StrCat("WriteNumberedCheckpoint: keep_last ", keep_last,
                     " (at least 1), step ", step, " (0 to 999999999999)"));
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat(
        "checkpoint directory '", dir, "' cannot be created: ", ec.message()));
  }
  // Before anything is written or removed: another run's checkpoints stay
  // untouched, and this one will be the newest (keep-last-K keeps it).
  RETURN_IF_ERROR(
      CheckCheckpointDirectory(dir, contents->manifest.run_id(), step));
  // Temporary files of writers killed before their rename.
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const size_t tmp = name.find(".ipuckpt.tmp-");
    if (tmp != std::string::npos && StepOf(name.substr(0, tmp + 8)) >= 0) {
      std::filesystem::remove(it->path(), ec);
    }
  }
  const std::string path = NumberedCheckpointPath(dir, step);
  contents->manifest.mutable_steps()->set_weight_updates(step);
  RETURN_IF_ERROR(WriteCheckpointFile(path, contents, options));
  RETURN_IF_ERROR(RemoveOldCheckpoints(dir, keep_last, step));
  return path;
}

absl::Status RemoveOldCheckpoints(const std::string& dir, int keep_last,
                                  int64_t also_keep) {
  if (keep_last < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("RemoveOldCheckpoints '", dir, "': keep_last ", keep_last,
                     "; at least 1 (the newest checkpoint always stays)"));
  }
  ASSIGN_OR_RETURN(std::vector<Listed> all, ListChecked(dir));
  std::set<int64_t> kept = {also_keep};
  for (size_t i = all.size() > size_t(keep_last) ? all.size() - keep_last : 0;
       i < all.size(); ++i) {
    kept.insert(all[i].step);
  }
  std::error_code ec;
  std::vector<std::string> doomed;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string rest;
    const std::string name = it->path().filename().string();
    const int64_t step = StepOfAny(name, &rest);
    if (step < 0) continue;
    if (kept.count(step) == 0 || rest.find(".tmp-") != std::string::npos) {
      doomed.push_back(it->path().string());
    }
  }
  // The committed files first: a checkpoint stops being listed before it
  // loses a part.
  std::stable_partition(doomed.begin(), doomed.end(), [](const std::string& p) {
    return absl::EndsWith(p, kSuffix);
  });
  for (const std::string& p : doomed) {
    if (::unlink(p.c_str()) != 0 && errno != ENOENT) {
      return absl::InternalError(
          absl::StrCat("checkpoint: remove old checkpoint file '", p,
                       "': ", std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

}  // namespace ipuflow::checkpoint
