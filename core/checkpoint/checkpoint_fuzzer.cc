// Fuzz target: bytes as a checkpoint file (core/checkpoint/checkpoint_file.h).
// The reader must refuse what it cannot trust and never crash, and what it
// accepts must be self-consistent: every tensor as large as its manifest
// entry says.
#include "core/checkpoint/checkpoint_file.h"
#include "core/status.h"
#include "core/testing/fuzz.h"

IPUFLOW_FUZZ_TARGET(checkpoint) {
  absl::StatusOr<ipuflow::checkpoint::CheckpointContents> c =
      ipuflow::checkpoint::ParseCheckpoint(
          absl::string_view(reinterpret_cast<const char*>(data), size),
          "fuzz input");
  if (!c.ok()) return;
  IPU_CHECK(c->tensors.size() ==
            static_cast<size_t>(c->manifest.tensors_size()));
  for (size_t i = 0; i < c->tensors.size(); ++i) {
    IPU_CHECK(c->tensors[i].TotalBytes() == c->manifest.tensors(i).size());
  }
}
