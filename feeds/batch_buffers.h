// Internal to DataLoader (feeds/data_loader.cc): the memory of the batches
// it assembles (a pool of buffers, reused once nothing references them) and
// the row copies that fill it.
#ifndef IPUFLOW_FEEDS_BATCH_BUFFERS_H_
#define IPUFLOW_FEEDS_BATCH_BUFFERS_H_

#include <algorithm>
#include <cstddef>
#include <deque>
#include <iterator>
#include <memory>
#include <utility>

#include "core/mutex.h"
#include "core/status.h"
#include "core/tensor.h"
#include "feeds/dataset.h"

namespace ipuflow::feeds::internal {

// The memory of the batches the loader assembles, kept for later batches
// once nothing references it: a 12.5 MB batch allocated afresh per host
// call is mmap'ed, faulted in page by page and cleared by the kernel each
// time. A tensor from Get views a pooled buffer through its own handle
// (a shared_ptr with a deleter); every Tensor, slice or view made from it
// copies that handle, so the buffer comes back (Put) only when the last of
// them is gone, on whichever thread drops it. Thread-safe.
class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  // An uninitialised tensor whose buffer nothing else references: a kept
  // buffer of the same size, else a new one (aborting as Tensor(dtype,
  // shape) does, like Stack). Invalid and resource tensors are not pooled.
  Tensor Get(DType dtype, const TensorShape& shape) {
    if (dtype == DType::kInvalid || dtype == DType::kResource) {
      return Tensor(dtype, shape);
    }
    const size_t bytes = shape.num_elements() * DTypeSize(dtype);
    std::shared_ptr<TensorBuffer> owner;
    {
      MutexLock l(&mu_);
      for (auto it = free_.rbegin(); it != free_.rend(); ++it) {
        if ((*it)->size() == bytes) {
          owner = std::move(*it);
          free_.erase(std::next(it).base());
          break;
        }
      }
    }
    if (owner == nullptr) {
      owner = Tensor(dtype, shape).buffer();
    } else {
      IPU_CHECK(ValidateShape(shape).ok());
    }
    TensorBuffer* raw = owner.get();
    std::shared_ptr<TensorBuffer> handle(
        raw, [pool = weak_from_this(),
              owner = std::move(owner)](TensorBuffer*) mutable {
          // A loader gone before its batches: the buffer is freed.
          if (std::shared_ptr<BufferPool> p = pool.lock()) {
            p->Put(std::move(owner));
          }
          owner.reset();
        });
    return Tensor(dtype, shape, std::move(handle));
  }

  // Keeps at most `n` unused buffers (at least: the largest n asked for).
  void KeepAtLeast(size_t n) {
    MutexLock l(&mu_);
    max_free_ = std::max(max_free_, n);
  }

 private:
  void Put(std::shared_ptr<TensorBuffer> owner) {
    MutexLock l(&mu_);
    // The oldest goes first: sizes no longer asked for (a short last
    // batch) age out.
    if (free_.size() >= max_free_ && !free_.empty()) free_.pop_front();
    if (max_free_ > 0) free_.push_back(std::move(owner));
  }

  Mutex mu_;
  std::deque<std::shared_ptr<TensorBuffer>> free_ ABSL_GUARDED_BY(mu_);
  size_t max_free_ ABSL_GUARDED_BY(mu_) = 0;
};

// Rows [begin, end) of `dst` = rows [from, from + end - begin) of `src`.
inline void CopyRows(const Element& src, int64_t from, const Element& dst,
                     int64_t begin, int64_t end) {
  for (size_t c = 0; c < src.size(); ++c) {
    dst[c].Slice(begin, end).CopyFrom(src[c].Slice(from, from + end - begin));
  }
}

// True if `s` has `first`'s components, dtypes and shapes.
inline bool SameLayout(const Element& s, const Element& first) {
  if (s.size() != first.size()) return false;
  for (size_t c = 0; c < s.size(); ++c) {
    if (s[c].dtype() != first[c].dtype() || s[c].shape() != first[c].shape()) {
      return false;
    }
  }
  return true;
}

// Components the one-pass copy handles: plain bytes (no resources, no
// invalid tensors); any other sample goes through Stack.
inline bool Copyable(const Element& s) {
  if (s.empty()) return false;
  for (const Tensor& t : s) {
    if (t.dtype() == DType::kInvalid || t.dtype() == DType::kResource) {
      return false;
    }
  }
  return true;
}

}  // namespace ipuflow::feeds::internal

#endif  // IPUFLOW_FEEDS_BATCH_BUFFERS_H_
