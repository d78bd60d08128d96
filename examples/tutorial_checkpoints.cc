#include "examples/tutorial_checkpoints.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/status.h"
#include "feeds/resume_input.h"

namespace ipuflow::examples {

absl::StatusOr<TutorialCheckpoints> TutorialCheckpoints::Open(
    const TutorialCheckpointOptions& o) {
  TutorialCheckpoints c;
  c.o_ = o;
  if (o.dir.empty()) return c;
  absl::StatusOr<std::string> latest = checkpoint::LatestCheckpoint(o.dir);
  if (!o.resume) {
    // A new run would be refused at its first save (one run per directory,
    // docs/CHECKPOINTS.md): say so before training.
    if (latest.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("--checkpoint-dir ", o.dir,
                       " holds checkpoints of an earlier run "
                       "(the newest: ",
                       *latest,
                       "); continue it with --resume, or choose "
                       "a directory without checkpoints"));
    }
    if (absl::IsNotFound(latest.status())) return c;
    return latest.status();
  }
  if (absl::IsNotFound(latest.status())) return c;  // Nothing to resume.
  RETURN_IF_ERROR(latest.status());
  ASSIGN_OR_RETURN(
      checkpoint::CheckpointContents contents,
      checkpoint::ReadCheckpoint(*latest, o.process_index, o.process_count));
  const int64_t done = contents.manifest.steps().weight_updates();
  if (done < 0 || done % o.per_call != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--resume: ", *latest, " stands at weight update ", done,
                     ", not a whole number of training calls of ", o.per_call,
                     " weight updates (--device-iterations); resume with the "
                     "--device-iterations it was saved with"));
  }
  c.first_update_ = done;
  c.resumed_from_ = *latest;
  c.resume_ = std::move(contents);
  std::printf("Resuming from %s (weight update %lld)\n", latest->c_str(),
              static_cast<long long>(done));
  return c;
}

absl::StatusOr<TutorialCheckpoints> TutorialCheckpoints::Open(
    const TutorialFlags& f, int process_index) {
  return Open({f.checkpoint_dir, f.checkpoint_every, f.keep_checkpoints,
               f.resume, f.device_iterations, f.stop_after, process_index,
               f.processes});
}

absl::StatusOr<TrainingCalls> TutorialCheckpoints::Calls(int64_t total) const {
  TrainingCalls c;
  c.total = total;
  c.first = first_update_ / o_.per_call;
  c.last =
      o_.stop_after > 0 ? std::min(total, o_.stop_after / o_.per_call) : total;
  if (c.first > total) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--resume: ", resumed_from_, " stands at weight update ", first_update_,
        ", past this run's last (", total * o_.per_call, "; --epochs)"));
  }
  if (c.last < c.first) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--stop-after ", o_.stop_after, ": the run resumes at weight update ",
        first_update_, ", already past it"));
  }
  return c;
}

absl::StatusOr<std::unique_ptr<feeds::DataLoader>>
TutorialCheckpoints::TrainLoader(feeds::DatasetPtr samples,
                                 const feeds::DataLoaderOptions& options) {
  if (!resume_.has_value()) {
    return feeds::DataLoader::Create(std::move(samples), options);
  }
  absl::StatusOr<std::unique_ptr<feeds::DataLoader>> loader =
      feeds::ResumeDataLoader(*resume_, kInfeedName, std::move(samples),
                              options);
  if (!loader.ok()) {
    return absl::Status(loader.status().code(),
                        absl::StrCat("--resume from ", resumed_from_, ": ",
                                     loader.status().message()));
  }
  return loader;
}

absl::Status TutorialCheckpoints::Attach(const Graph* graph,
                                         DeviceProgram* trained) {
  if (o_.dir.empty()) return absl::OkStatus();
  run_ = std::make_unique<checkpoint::TrainingCheckpoint>(graph, trained);
  if (!resume_.has_value()) return absl::OkStatus();
  const absl::Status restored = run_->Restore(*resume_);
  resume_.reset();  // The variables hold copies.
  if (!restored.ok()) {
    return absl::Status(restored.code(),
                        absl::StrCat("--resume from ", resumed_from_, ": ",
                                     restored.message()));
  }
  last_saved_ = first_update_;
  return absl::OkStatus();
}

absl::Status TutorialCheckpoints::AfterCall(int64_t calls, bool last) {
  const int64_t weight_updates = calls * o_.per_call;
  if (run_ == nullptr) return absl::OkStatus();
  const bool due = o_.every > 0 && weight_updates % o_.every == 0;
  if ((!due && !last) || weight_updates == last_saved_) {
    return last ? Summary() : absl::OkStatus();
  }
  const auto start = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(run_->Save(o_.dir, weight_updates, o_.keep).status());
  save_seconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  ++saves_;
  last_saved_ = weight_updates;
  return last ? Summary() : absl::OkStatus();
}

absl::Status TutorialCheckpoints::Summary() const {
  std::printf("Checkpoints: %d saved in %s (the newest %d kept), %.2f s\n",
              saves_, o_.dir.c_str(), o_.keep, save_seconds_);
  return absl::OkStatus();
}

absl::Status TutorialCheckpoints::Stopped() const {
  std::printf(
      "Stopped after %lld weight updates (--stop-after); continue with "
      "--resume\n",
      static_cast<long long>(o_.stop_after));
  return absl::OkStatus();
}

}  // namespace ipuflow::examples
