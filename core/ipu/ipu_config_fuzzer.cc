// Fuzz target: an IPUConfig text file through LoadIPUConfig and
// ResolveIPUConfig (which bounds every size). Creating the system is not
// fuzzed: it starts threads.
#include "core/ipu/ipu_system.h"
#include "core/testing/fuzz.h"
#include "google/protobuf/stubs/logging.h"

IPUFLOW_FUZZ_TARGET(ipu_config) {
  // protobuf logs every text-format error to stderr: millions of lines.
  [[maybe_unused]] static google::protobuf::LogHandler* const silenced =
      google::protobuf::SetLogHandler(nullptr);
  const std::string path =
      ipuflow::fuzzing::WriteInput(data, size, ".ipu_config.txt");
  absl::StatusOr<ipuflow::IPUConfig> config = ipuflow::LoadIPUConfig(path);
  if (config.ok()) (void)ipuflow::ResolveIPUConfig(*config);
}
