// Fuzz targets: one entry point per parser of outside bytes, written once
// and built two ways (bazel/ipuflow.bzl, ipuflow_fuzzer):
//   - a libFuzzer binary (--config=fuzz, clang): the entry point becomes
//     LLVMFuzzerTestOneInput;
//   - the regression test //tests/fuzz:fuzz_regression_test (the normal
//     build): the entry point registers under its name and the test runs it
//     over the target's seed corpus, crash reproducers included.
//
//   IPUFLOW_FUZZ_TARGET(idx_reader) {
//     std::string path = fuzzing::WriteInput(data, size, ".idx");
//     (void)feeds::ReadIdx(path);          // Any status is fine; no crash.
//   }
//
// A target must not crash, leak or hang on any input, and returns nothing:
// invariants it checks abort (IPU_CHECK), which both drivers report.
#ifndef IPUFLOW_CORE_TESTING_FUZZ_H_
#define IPUFLOW_CORE_TESTING_FUZZ_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace ipuflow::fuzzing {

using FuzzFn = void (*)(const uint8_t* data, size_t size);

// Registers `fn` as `name` (regression builds). Returns true.
bool RegisterTarget(const char* name, FuzzFn fn);
// Every registered target by name.
const std::map<std::string, FuzzFn>& Targets();

// Writes `data` to a file private to this process (under $TEST_TMPDIR, else
// /dev/shm or /tmp) whose name ends with `suffix`, for parsers that read paths;
// returns its path. The same path is reused by every call with that suffix.
std::string WriteInput(const uint8_t* data, size_t size, const char* suffix);

}  // namespace ipuflow::fuzzing

#ifdef IPUFLOW_LIBFUZZER
#define IPUFLOW_FUZZ_TARGET(name)                                           \
  static void IpuflowFuzzTarget_##name(const uint8_t* data, size_t size);   \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { \
    IpuflowFuzzTarget_##name(data, size);                                   \
    return 0;                                                               \
  }                                                                         \
  static void IpuflowFuzzTarget_##name(const uint8_t* data, size_t size)
#else
#define IPUFLOW_FUZZ_TARGET(name)                                          \
  static void IpuflowFuzzTarget_##name(const uint8_t* data, size_t size);  \
  [[maybe_unused]] static const bool ipuflow_fuzz_registered_##name =      \
      ::ipuflow::fuzzing::RegisterTarget(#name, IpuflowFuzzTarget_##name); \
  static void IpuflowFuzzTarget_##name(const uint8_t* data, size_t size)
#endif

#endif  // IPUFLOW_CORE_TESTING_FUZZ_H_
