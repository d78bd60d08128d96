#include "ops/onednn/onednn.h"

#include <omp.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/cpu_isa.h"

namespace ipuflow::ops::onednn {
namespace {

// IPUFLOW_MAX_ISA=avx2 caps oneDNN as it caps ipuflow's kernels
// (core/cpu_isa.h). oneDNN takes the cap only before its first JIT kernel or
// ISA query, so every entry point here applies it first (once), and so does
// loading this file.
void ApplyIsaCap() {
  static const bool applied = [] {
    if (IsaCapped() &&
        dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx2) != dnnl::status::success) {
      std::fprintf(stderr, "ipuflow: oneDNN did not take IPUFLOW_MAX_ISA\n");
    }
    return true;
  }();
  (void)applied;
}
const bool kIsaCapSet = (ApplyIsaCap(), true);

}  // namespace

const dnnl::engine& Engine() {
  ApplyIsaCap();
  static const dnnl::engine* engine =
      new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

dnnl::stream& ThreadStream() {
  thread_local dnnl::stream stream(Engine());
  return stream;
}

void UseOneThread() {
  ApplyIsaCap();
  // libgomp keeps nthreads-var per thread once a thread sets it, so this
  // leaves other threads alone. Checked on every call (reading the
  // thread's setting is a load): a caller may have raised it since.
  if (omp_get_max_threads() != 1) omp_set_num_threads(1);
}

std::string IsaName() {
  ApplyIsaCap();
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "other";
  }
}

std::string Description() {
  const dnnl_version_t* v = dnnl_version();
  const char* runtime = v->cpu_runtime == DNNL_RUNTIME_OMP   ? "OpenMP"
                        : v->cpu_runtime == DNNL_RUNTIME_SEQ ? "sequential"
                                                             : "other";
  return absl::StrCat("oneDNN ", v->major, ".", v->minor, ".", v->patch, " (",
                      runtime, " runtime, one thread per caller), ISA ",
                      IsaName());
}

dnnl::primitive_attr ScratchpadAttr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

dnnl::memory Wrap(const dnnl::memory::desc& d, const void* data) {
  return dnnl::memory(d, Engine(), const_cast<void*>(data));
}

void Execute(const dnnl::primitive& p, const dnnl::memory::desc& scratchpad,
             std::unordered_map<int, dnnl::memory> args) {
  UseOneThread();
  thread_local std::vector<uint8_t> buffer;
  const size_t bytes = scratchpad.get_size();
  if (bytes > 0) {
    // 64-byte alignment, as oneDNN's own allocations.
    if (buffer.size() < bytes + 64) buffer.resize(bytes + 64);
    const uintptr_t base = reinterpret_cast<uintptr_t>(buffer.data());
    void* aligned = reinterpret_cast<void*>((base + 63) & ~uintptr_t{63});
    args.emplace(DNNL_ARG_SCRATCHPAD, Wrap(scratchpad, aligned));
  }
  dnnl::stream& stream = ThreadStream();
  p.execute(stream, args);
  stream.wait();
}

}  // namespace ipuflow::ops::onednn
