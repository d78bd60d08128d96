// Fuzz target: a checkpoint's manifest as hostile input to a restore. The
// bytes are a Manifest (checkpoint.proto; the seeds are a real run's,
// core/checkpoint/testdata/fuzz/checkpoint_restore), paired with that run's
// tensors, then read the way a resumed run reads it: ResumeDataset and
// ResumeDataLoader (feeds/resume_input.h: the input position), and
// TrainingCheckpoint::Restore into the test model (checkpoint_test_model.h)
// built at the seeds' input position. Any status is fine; a crash, an
// uncaught exception, a read past a vector or a signed overflow (UBSan) is
// not. A restore that succeeds must have had consistent positions.
#include <memory>

#include "core/checkpoint/checkpoint_test_model.h"
#include "core/checkpoint/manifest_reading.h"
#include "core/checkpoint/training_state.h"
#include "core/status.h"
#include "core/testing/fuzz.h"
#include "feeds/dataset.h"
#include "feeds/resume_input.h"

namespace ipuflow::checkpoint {

// A run saved after 2 weight updates and a fresh run standing at its input
// position, built once (seconds) and kept for every input.
struct Fixture {
  Fixture() {
    testing::TrainingRun first(testing::RunConfig{}, nullptr);
    IPU_CHECK_OK(first.status());
    IPU_CHECK_OK(first.Train(2));
    absl::StatusOr<CheckpointContents> c = first.ckpt().Capture(2);
    IPU_CHECK(c.ok());
    saved = *std::move(c);
    testing::RunConfig input_only;
    input_only.restore = false;
    target = std::make_unique<testing::TrainingRun>(input_only, &saved);
    IPU_CHECK_OK(target->status());
    options.batch_size = testing::kBatch;
    options.replicas = 2;
    options.gradient_accumulation = 2;
    options.shuffle = true;
    options.seed = 99;
  }
  CheckpointContents saved;
  std::unique_ptr<testing::TrainingRun> target;
  feeds::DataLoaderOptions options;  // The model's, in Sync mode.
};

}  // namespace ipuflow::checkpoint

IPUFLOW_FUZZ_TARGET(checkpoint_restore) {
  namespace ckpt = ::ipuflow::checkpoint;
  static ckpt::Fixture* const f = new ckpt::Fixture();  // Kept: reachable.
  ckpt::CheckpointContents c;
  if (!c.manifest.ParseFromArray(data, static_cast<int>(size))) return;
  c.tensors = f->saved.tensors;
  namespace feeds = ::ipuflow::feeds;
  (void)feeds::ResumeDataset(c, "train", feeds::Range(0, 1000));
  (void)feeds::ResumeDataLoader(c, "train", ckpt::testing::Samples(48),
                                f->options);
  if (!f->target->ckpt().Restore(c).ok()) return;
  for (const ckpt::InfeedPosition& p : c.manifest.infeeds()) {
    absl::StatusOr<int64_t> total = ckpt::TotalConsumed(p);
    IPU_CHECK(total.ok() && *total >= 0);
  }
}
