// What every oneDNN kernel of ipuflow shares: the CPU engine, a stream per
// thread, the threading rule, user-managed scratchpads and a cache of
// primitives keyed by shape.
//
//   onednn::UseOneThread();  // On every thread that calls oneDNN.
//   static onednn::PrimitiveCache<ConvKey, ConvPrimitives> cache;
//   std::shared_ptr<const ConvPrimitives> p =
//       cache.GetOrCreate(key, [&] { return MakeConvPrimitives(key); });
//   onednn::Execute(p->conv, p->pd.scratchpad_desc(), {{DNNL_ARG_SRC, x}});
//
// Threading. Debian's libdnnl runs on OpenMP (DNNL_CPU_RUNTIME OMP): left
// alone, every call would spread over an OpenMP team of one thread per core,
// on top of ipuflow's own intra-op pools (one per emulated IPU). UseOneThread
// sets the calling thread's OpenMP thread count to one (a per-thread setting
// in libgomp), so a oneDNN call runs on the thread that makes it and the
// kernels split their work over the intra-op pool themselves. Primitives are
// created with that setting too (oneDNN fixes a primitive's thread count at
// creation).
//
// ISA: oneDNN picks its kernels at run time from the CPU (AVX-512 where
// there is one, AVX2 otherwise); DNNL_MAX_CPU_ISA=AVX2 in the environment
// caps it, as on an AVX2-only machine.
//
// Thread safety: every function may be called from any thread. A cached
// primitive may run on several threads at once: its scratchpad is the
// calling thread's (user-managed scratchpad), and so is its stream.
#ifndef IPUFLOW_OPS_ONEDNN_ONEDNN_H_
#define IPUFLOW_OPS_ONEDNN_ONEDNN_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include "core/mutex.h"
#include "dnnl.hpp"

namespace ipuflow::ops::onednn {

// The process's CPU engine.
const dnnl::engine& Engine();

// The calling thread's stream on Engine() (streams are not shared between
// threads).
dnnl::stream& ThreadStream();

// Makes oneDNN calls from this thread run on this thread only (see the
// file comment): sets the calling thread's OpenMP thread count to 1 if it
// is not, and leaves it so. Cheap (a thread-local read) when it is 1.
void UseOneThread();

// "avx512_core", "avx2", ...: the instruction set oneDNN's kernels use on
// this machine (after any DNNL_MAX_CPU_ISA cap), and oneDNN's version and
// CPU runtime, e.g. "oneDNN 2.6.3 (OpenMP), ISA avx512_core_bf16".
std::string IsaName();
std::string Description();

// Primitive attributes with a user-managed scratchpad (what Execute
// expects), so that one primitive can run on several threads at once.
dnnl::primitive_attr ScratchpadAttr();

// Runs `p` on the calling thread's stream and waits, giving it a scratchpad
// of the calling thread described by `scratchpad`.
void Execute(const dnnl::primitive& p, const dnnl::memory::desc& scratchpad,
             std::unordered_map<int, dnnl::memory> args);

// A plain memory object over `data` (not owned; must outlive its use).
dnnl::memory Wrap(const dnnl::memory::desc& d, const void* data);

// Primitives created once per key and kept for the process's life (a model
// has a handful of shapes). Value must be immutable once made.
// Thread safety: GetOrCreate may be called from any thread; two threads
// missing the same key at once may both create it, and one result is kept.
template <typename Key, typename Value>
class PrimitiveCache {
 public:
  std::shared_ptr<const Value> GetOrCreate(const Key& key,
                                           const std::function<Value()>& make) {
    {
      MutexLock l(&mu_);
      auto it = map_.find(key);
      if (it != map_.end()) return it->second;
    }
    // Created outside the lock: making a primitive takes up to milliseconds.
    auto value = std::make_shared<const Value>(make());
    MutexLock l(&mu_);
    return map_.emplace(key, std::move(value)).first->second;
  }

  size_t size() const {
    MutexLock l(&mu_);
    return map_.size();
  }

 private:
  mutable Mutex mu_;
  std::map<Key, std::shared_ptr<const Value>> map_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ipuflow::ops::onednn

#endif  // IPUFLOW_OPS_ONEDNN_ONEDNN_H_
