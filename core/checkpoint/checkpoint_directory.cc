#include "core/checkpoint/checkpoint_directory.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/status.h"

namespace ipuflow::checkpoint {

std::string NumberedCheckpointPath(const std::string& dir, int64_t step) {
  return absl::StrFormat("%s/ckpt-%012d.ipuckpt", dir, step);
}

namespace {
// The step of a numbered checkpoint's file name, or -1.
int64_t StepOf(const std::string& name) {
  constexpr absl::string_view kPrefix = "ckpt-", kSuffix = ".ipuckpt";
  if (name.size() != kPrefix.size() + 12 + kSuffix.size() ||
      !absl::StartsWith(name, kPrefix) || !absl::EndsWith(name, kSuffix)) {
    return -1;
  }
  int64_t step;
  const std::string digits = name.substr(kPrefix.size(), 12);
  if (!std::all_of(digits.begin(), digits.end(), ::isdigit) ||
      !absl::SimpleAtoi(digits, &step)) {
    return -1;
  }
  return step;
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
  ASSIGN_OR_RETURN(auto all, ListCheckpoints(dir));
  for (size_t i = 0; i + keep_last < all.size(); ++i) {
    if (::unlink(all[i].second.c_str()) != 0) {
      return absl::InternalError(
          absl::StrCat("checkpoint: remove old checkpoint '", all[i].second,
                       "': ", std::strerror(errno)));
    }
  }
  return path;
}

}  // namespace ipuflow::checkpoint
