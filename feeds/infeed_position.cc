#include "feeds/infeed_position.h"

#include "absl/strings/str_cat.h"
#include "core/checkpoint/manifest_reading.h"
#include "core/status.h"

namespace ipuflow::feeds::internal {
namespace {

using checkpoint::DataLoaderPosition;
using checkpoint::InfeedPosition;
using checkpoint::Manifest;

// The micro-batches of one DataLoader step.
int64_t MicroBatchesPerStep(const DataLoaderOptions& o) {
  return o.device_iterations * o.gradient_accumulation * o.replicas;
}

// A DataLoader's position after the devices consumed `consumed`
// micro-batches of it: refused part-way through one of its steps.
absl::Status AddLoaderPosition(const std::string& name,
                               const DataLoader& loader, int64_t consumed,
                               Manifest* m) {
  const DataLoaderOptions& o = loader.options();
  const int64_t per_step = MicroBatchesPerStep(o);
  if (consumed % per_step != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "infeed '", name, "': the devices consumed ", consumed,
        " micro-batches of its DataLoader, not a whole number of its "
        "steps (device_iterations(",
        o.device_iterations, ") x gradient_accumulation(",
        o.gradient_accumulation, ") x replicas(", o.replicas, ") = ", per_step,
        "); save after a whole step"));
  }
  const int64_t spe = loader.samples_per_epoch();
  const int64_t at = loader.start_epoch() * spe + loader.start_sample() +
                     consumed / per_step * loader.combined_batch_size();
  const DataLoaderPlanKey key = loader.plan_key();
  DataLoaderPosition* l = m->add_loaders();
  l->set_name(name);
  l->set_num_samples(key.num_samples);
  l->set_seed(key.seed);
  l->set_shuffle(key.shuffle);
  l->set_drop_last(key.drop_last);
  l->set_combined_batch_size(key.combined_batch_size);
  l->set_process_count(key.process_count);
  l->set_samples_per_epoch(spe);
  l->set_epoch(at / spe);
  l->set_sample(at % spe);
  l->set_micro_batch_size(o.batch_size);
  return absl::OkStatus();
}

}  // namespace

absl::Status SaveInfeedPosition(const std::string& name,
                                const std::vector<int64_t>& base,
                                const std::vector<int64_t>& consumed,
                                const DataLoader* loader, int replicas,
                                Manifest* m) {
  int64_t since = 0;  // By this queue.
  InfeedPosition* p = m->add_infeeds();
  p->set_name(name);
  for (int r = 0; r < replicas; ++r) {
    const size_t i = static_cast<size_t>(r);
    const int64_t now = i < consumed.size() ? consumed[i] : 0;
    since += now;
    p->add_consumed(now + (i < base.size() ? base[i] : 0));
  }
  if (loader == nullptr) return absl::OkStatus();
  return AddLoaderPosition(name, *loader, since, m);
}

absl::StatusOr<int64_t> CheckInfeedPosition(
    const std::string& name, const std::vector<int64_t>& consumed,
    const DataLoader* loader, const Manifest& m, int replicas) {
  const InfeedPosition* p = checkpoint::FindInfeed(m, name);
  if (p == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("the checkpoint has no infeed '", name,
                     "' (it has: ", checkpoint::InfeedNames(m), ")"));
  }
  for (int64_t n : consumed) {
    if (n != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "infeed '", name,
          "' has already fed the devices; restore before the first run "
          "(its dataset from ResumeDataset or ResumeDataLoader)"));
    }
  }
  ASSIGN_OR_RETURN(const int64_t total, checkpoint::TotalConsumed(*p));
  if (total % replicas != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "infeed '", name, "': ", total, " elements consumed do not split over ",
        replicas, " replicas"));
  }
  const DataLoaderPosition* l = checkpoint::FindLoader(m, name);
  if ((l != nullptr) != (loader != nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "infeed '", name, "' was ",
        l != nullptr ? "fed by a DataLoader" : "not fed by a DataLoader",
        " in the checkpoint and is ", loader != nullptr ? "" : "not ", "here"));
  }
  if (l != nullptr) {
    absl::StatusOr<int64_t> want = checkpoint::LoaderPosition(*l);
    if (!want.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("infeed '", name, "': ", want.status().message()));
    }
    const int64_t have = loader->start_epoch() * loader->samples_per_epoch() +
                         loader->start_sample();
    if (*want != have) {
      return absl::InvalidArgumentError(absl::StrCat(
          "infeed '", name, "': its DataLoader starts at epoch ",
          loader->start_epoch(), " sample ", loader->start_sample(),
          ", the checkpoint stands at epoch ", l->epoch(), " sample ",
          l->sample(), "; make it with ResumeDataLoader"));
    }
  }
  return total / replicas;
}

}  // namespace ipuflow::feeds::internal
