// Dataset::Prefetch: a bounded single-producer single-consumer queue.
//
// Producer: one thread per iterator, started with the iterator, reads the
// input and pushes each result (element or error) while the queue holds
// fewer than buffer_size; it blocks on a full queue and stops at the input's
// end or on cancellation. Consumer: GetNext, which blocks on an empty queue
// until the producer pushes or ends. Destruction cancels (waking a producer
// blocked on a full queue) and joins; a producer inside the input's GetNext
// finishes that call first. Elements cross threads under mu_, so whatever
// the producer wrote into one happens-before GetNext returns it.
#include <deque>
#include <memory>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/mutex.h"
#include "feeds/dataset.h"
#include "feeds/dataset_internal.h"

namespace ipuflow::feeds {
namespace {

using internal::EndOfSequence;
using internal::IsEnd;

class PrefetchDataset : public internal::UnaryDataset {
 public:
  PrefetchDataset(DatasetPtr input, int64_t buffer_size)
      : UnaryDataset(input, input->spec()), buffer_size_(buffer_size) {}
  int64_t Cardinality() const override { return input()->Cardinality(); }
  const Dataset* ordered_input() const override { return input().get(); }
  std::string DebugString() const override {
    return Chain(absl::StrCat("Prefetch(", buffer_size_, ")"));
  }
  std::unique_ptr<Iterator> MakeIterator(
      const IteratorContext& ctx) const override;
  int64_t buffer_size() const { return buffer_size_; }

 private:
  int64_t buffer_size_;
};

class PrefetchIterator : public Iterator {
 public:
  PrefetchIterator(std::shared_ptr<const PrefetchDataset> ds,
                   std::unique_ptr<Iterator> input)
      : ds_(std::move(ds)),
        input_(std::move(input)),
        producer_([this] { ProducerLoop(); }) {}

  ~PrefetchIterator() override {
    {
      MutexLock l(&mu_);
      cancelled_ = true;
    }
    not_full_.SignalAll();
    producer_.join();
  }

  absl::StatusOr<Element> GetNext() override {
    MutexLock l(&mu_);
    not_empty_.Await(&mu_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return !buffer_.empty() || input_done_;
    });
    if (buffer_.empty()) return EndOfSequence();
    absl::StatusOr<Element> e = std::move(buffer_.front());
    buffer_.pop_front();
    not_full_.Signal();
    return e;
  }

 private:
  void ProducerLoop() {
    while (WaitForRoom()) {
      absl::StatusOr<Element> e = input_->GetNext();
      MutexLock l(&mu_);
      if (IsEnd(e.status())) {
        input_done_ = true;
      } else {
        buffer_.push_back(std::move(e));
      }
      not_empty_.Signal();
      if (input_done_) return;
    }
  }

  // Blocks while the queue is full; false once cancelled.
  bool WaitForRoom() {
    MutexLock l(&mu_);
    not_full_.Await(&mu_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return cancelled_ ||
             static_cast<int64_t>(buffer_.size()) < ds_->buffer_size();
    });
    return !cancelled_;
  }

  const std::shared_ptr<const PrefetchDataset> ds_;
  const std::unique_ptr<Iterator> input_;  // Used by the producer only.

  Mutex mu_;
  CondVar not_full_;   // Producer: room in the queue, or cancelled.
  CondVar not_empty_;  // Consumer: an element, or the end.
  std::deque<absl::StatusOr<Element>> buffer_ ABSL_GUARDED_BY(mu_);
  bool input_done_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;

  std::thread producer_;  // Last: starts once the rest is constructed.
};

std::unique_ptr<Iterator> PrefetchDataset::MakeIterator(
    const IteratorContext& ctx) const {
  return std::make_unique<PrefetchIterator>(self<PrefetchDataset>(),
                                            input()->MakeIterator(ctx));
}

}  // namespace

DatasetPtr Dataset::Prefetch(int64_t buffer_size) const {
  if (!ok()) return shared_from_this();
  if (buffer_size < 1) {
    return ErrorDataset(absl::InvalidArgumentError(
        absl::StrCat(DebugString(), ".Prefetch(", buffer_size,
                     "): buffer_size must be >= 1")));
  }
  absl::Status bounded = internal::CheckBufferSize(
      *this, absl::StrCat("Prefetch(", buffer_size, ")"), buffer_size);
  if (!bounded.ok()) return ErrorDataset(bounded);
  return std::make_shared<PrefetchDataset>(shared_from_this(), buffer_size);
}

}  // namespace ipuflow::feeds
