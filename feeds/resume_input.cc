#include "feeds/resume_input.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/checkpoint/manifest_reading.h"
#include "core/status.h"

namespace ipuflow::feeds {

using checkpoint::CheckpointContents;
using checkpoint::DataLoaderPosition;
using checkpoint::FindInfeed;
using checkpoint::FindLoader;
using checkpoint::InfeedNames;
using checkpoint::InfeedPosition;
using checkpoint::TotalConsumed;

absl::StatusOr<DatasetPtr> ResumeDataset(const CheckpointContents& c,
                                         const std::string& name,
                                         DatasetPtr dataset) {
  const InfeedPosition* p = FindInfeed(c.manifest, name);
  if (p == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("ResumeDataset: the checkpoint has no infeed '", name,
                     "' (it has: ", InfeedNames(c.manifest), ")"));
  }
  ASSIGN_OR_RETURN(const int64_t total, TotalConsumed(*p));
  return dataset->Skip(total);
}

absl::StatusOr<std::unique_ptr<DataLoader>> ResumeDataLoader(
    const CheckpointContents& c, const std::string& name, DatasetPtr samples,
    const DataLoaderOptions& options) {
  const DataLoaderPosition* l = FindLoader(c.manifest, name);
  if (l == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "ResumeDataLoader: the checkpoint has no DataLoader for infeed '", name,
        "' (infeeds: ", InfeedNames(c.manifest), ")"));
  }
  const std::string where = absl::StrCat("ResumeDataLoader '", name, "': ");
  // Made at the start first, to learn its sizes; then at the position.
  ASSIGN_OR_RETURN(std::unique_ptr<DataLoader> probe,
                   DataLoader::Create(samples, options));
  const DataLoaderPlanKey k = probe->plan_key();
  auto differs = [&](const char* field, auto saved, auto here) -> absl::Status {
    if (saved == here) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        where, field, " is ", saved, " in the checkpoint and ", here,
        " here: the rest of the epoch would be another order"));
  };
  RETURN_IF_ERROR(differs("num_samples", l->num_samples(), k.num_samples));
  RETURN_IF_ERROR(differs("seed", l->seed(), k.seed));
  RETURN_IF_ERROR(differs("shuffle", l->shuffle(), k.shuffle));
  RETURN_IF_ERROR(differs("drop_last", l->drop_last(), k.drop_last));
  RETURN_IF_ERROR(
      differs("process_count", l->process_count(), k.process_count));
  RETURN_IF_ERROR(differs("samples per epoch", l->samples_per_epoch(),
                          probe->samples_per_epoch()));
  const int64_t c_here = probe->combined_batch_size();
  if (l->sample() % c_here != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        where, "the checkpoint stands at sample ", l->sample(), " of epoch ",
        l->epoch(), ", not a whole number of this loader's steps of ", c_here,
        " samples (it saved with steps of ", l->combined_batch_size(),
        "): the data cannot be split over these replicas there; resume with a "
        "replica count whose step divides ",
        l->sample()));
  }
  if (c.manifest.has_part() &&
      (options.process_index != c.manifest.part().process() ||
       options.process_count != c.manifest.part().processes())) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, "the checkpoint is process ", c.manifest.part().process(),
        "'s of ", c.manifest.part().processes(), ", the loader is process ",
        options.process_index, "'s of ", options.process_count));
  }
  probe.reset();
  return DataLoader::CreateAt(std::move(samples), options, l->epoch(),
                              l->sample());
}

}  // namespace ipuflow::feeds
