#include "core/testing/fuzz.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace ipuflow::fuzzing {

namespace {
std::map<std::string, FuzzFn>& Registry() {
  static auto* targets = new std::map<std::string, FuzzFn>();
  return *targets;
}
}  // namespace

bool RegisterTarget(const char* name, FuzzFn fn) {
  Registry()[name] = fn;
  return true;
}

const std::map<std::string, FuzzFn>& Targets() { return Registry(); }

std::string WriteInput(const uint8_t* data, size_t size, const char* suffix) {
  // Memory-backed /dev/shm when there is one: a fuzzer writes every input.
  const char* dir = std::getenv("TEST_TMPDIR");
  if (dir == nullptr) dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  const std::string path =
      std::string(dir) + "/ipuflow_fuzz_" + std::to_string(getpid()) + suffix;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();  // The driver's environment, not the input.
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace ipuflow::fuzzing
