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

absl::StatusOr<std::vector<std::pair<int64_t, std::string>>> ListCheckpoints(
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

absl::StatusOr<std::string> LatestCheckpoint(const std::string& dir) {
  ASSIGN_OR_RETURN(auto all, ListCheckpoints(dir));
  if (all.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no checkpoint (ckpt-<step>.ipuckpt) in '", dir, "'"));
  }
  return all.back().second;
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
  RETURN_IF_ERROR(WriteCheckpointFile(path, contents, options));
  RETURN_IF_ERROR(RemoveOldCheckpoints(dir, keep_last));
  return path;
}

absl::Status RemoveOldCheckpoints(const std::string& dir, int keep_last) {
  ASSIGN_OR_RETURN(auto all, ListCheckpoints(dir));
  std::set<int64_t> kept;
  for (size_t i = all.size() > size_t(keep_last) ? all.size() - keep_last : 0;
       i < all.size(); ++i) {
    kept.insert(all[i].first);
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
