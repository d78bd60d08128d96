// Dataset::Map, sequential (num_parallel_calls == 1: fn runs in GetNext's
// caller) or parallel (a pool of num_parallel_calls threads per iterator).
//
// The parallel iterator keeps a queue of slots, one per input element, in
// input order. A worker takes the "puller" role (one at a time), appends a
// slot and reads the input; it then runs fn outside the lock and fills its
// slot. GetNext waits for the front slot. So the output order is the input
// order whatever fn's timing, and an error comes back in its element's place.
//
//   slots_:  [done][running][done][pulling]  <- appended by the puller
//             ^ GetNext pops when done         (at most capacity_ slots)
#include <deque>
#include <exception>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/mutex.h"
#include "feeds/dataset.h"
#include "feeds/dataset_internal.h"

namespace ipuflow::feeds {
namespace {

using internal::EndOfSequence;
using internal::IsEnd;

class MapDataset : public internal::UnaryDataset {
 public:
  MapDataset(DatasetPtr input, MapFn fn, int num_parallel_calls,
             std::optional<ElementSpec> output_spec)
      : UnaryDataset(input, output_spec ? *output_spec : ElementSpec()),
        fn_(std::move(fn)),
        num_parallel_calls_(num_parallel_calls) {}
  int64_t Cardinality() const override { return input()->Cardinality(); }
  const Dataset* ordered_input() const override { return input().get(); }
  std::string DebugString() const override {
    return Chain(num_parallel_calls_ == 1
                     ? "Map()"
                     : absl::StrCat("Map(num_parallel_calls=",
                                    num_parallel_calls_, ")"));
  }
  std::unique_ptr<Iterator> MakeIterator(
      const IteratorContext& ctx) const override;

  int num_parallel_calls() const { return num_parallel_calls_; }

  // fn applied to input element `index`, checked against the declared spec.
  // fn's OutOfRange becomes InvalidArgument: passed on as is, it would end
  // the dataset silently.
  // Other errors keep their code and name this Map and the element, so a
  // kernel error inside fn (a graph it runs) reaches the device or host
  // with its node and where it happened.
  absl::StatusOr<Element> Apply(Element in, int64_t index) const {
    absl::StatusOr<Element> out = absl::InternalError("not run");
#if defined(__cpp_exceptions)
    try {
      out = fn_(std::move(in));
    } catch (const std::exception& e) {
      return absl::InternalError(
          absl::StrCat(DebugString(), ": the function threw on element ", index,
                       ": ", e.what()));
    }
#else
    out = fn_(std::move(in));
#endif
    if (!out.ok() && !IsEnd(out.status())) {
      return absl::Status(
          out.status().code(),
          absl::StrCat(DebugString(), ": the function failed on element ",
                       index, ": ", out.status().message()));
    }
    if (IsEnd(out.status())) {
      return absl::InvalidArgumentError(absl::StrCat(
          DebugString(), ": the function returned OUT_OF_RANGE for element ",
          index, " (", out.status().message(),
          "); a Map function cannot end the dataset"));
    }
    if (out.ok()) RETURN_IF_ERROR(spec().Check(*out, DebugString(), index));
    return out;
  }

 private:
  MapFn fn_;
  int num_parallel_calls_;
};

class SequentialMapIterator : public Iterator {
 public:
  SequentialMapIterator(std::shared_ptr<const MapDataset> ds,
                        std::unique_ptr<Iterator> input)
      : ds_(std::move(ds)), input_(std::move(input)) {}

  absl::StatusOr<Element> GetNext() override {
    if (!input_) return EndOfSequence();
    absl::StatusOr<Element> in = input_->GetNext();
    if (IsEnd(in.status())) {
      input_.reset();
      return EndOfSequence();
    }
    const int64_t index = index_++;
    if (!in.ok()) return in.status();
    return ds_->Apply(*std::move(in), index);
  }

 private:
  std::shared_ptr<const MapDataset> ds_;
  std::unique_ptr<Iterator> input_;  // Null once the input has ended.
  int64_t index_ = 0;
};

class ParallelMapIterator : public Iterator {
 public:
  ParallelMapIterator(std::shared_ptr<const MapDataset> ds,
                      std::unique_ptr<Iterator> input)
      : ds_(std::move(ds)),
        input_(std::move(input)),
        capacity_(2 * ds_->num_parallel_calls()) {
    for (int i = 0; i < ds_->num_parallel_calls(); ++i) {
      workers_.emplace_back([this] { WorkerLoop(); });
    }
  }

  // Wakes every waiting worker and joins them all; a worker inside fn or
  // the input's GetNext finishes that call first.
  ~ParallelMapIterator() override {
    {
      MutexLock l(&mu_);
      cancelled_ = true;
    }
    work_cv_.SignalAll();
    for (std::thread& t : workers_) t.join();
  }

  absl::StatusOr<Element> GetNext() override {
    MutexLock l(&mu_);
    ready_cv_.Await(&mu_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return slots_.empty() ? input_done_ : slots_.front()->done;
    });
    if (slots_.empty()) return EndOfSequence();
    std::shared_ptr<Slot> slot = std::move(slots_.front());
    slots_.pop_front();
    work_cv_.Signal();  // A slot is free.
    return std::move(slot->result);
  }

 private:
  struct Slot {
    int64_t index = 0;
    bool done = false;  // Guarded by mu_ (as are the other fields).
    absl::StatusOr<Element> result;
  };

  void WorkerLoop() {
    while (true) {
      std::shared_ptr<Slot> slot = ReserveSlot();
      if (!slot) return;
      // Only the holder of the puller role reads the input.
      absl::StatusOr<Element> in = input_->GetNext();
      if (!EndPull(in.status())) continue;
      absl::StatusOr<Element> out =
          in.ok() ? ds_->Apply(*std::move(in), slot->index) : in.status();
      MutexLock l(&mu_);
      slot->result = std::move(out);
      slot->done = true;
      ready_cv_.Signal();
    }
  }

  // Waits to become the puller with a free slot; appends and returns that
  // slot, or null once cancelled.
  std::shared_ptr<Slot> ReserveSlot() {
    MutexLock l(&mu_);
    work_cv_.Await(&mu_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return cancelled_ || (!input_done_ && !pulling_ &&
                            static_cast<int>(slots_.size()) < capacity_);
    });
    if (cancelled_) return nullptr;
    pulling_ = true;
    auto slot = std::make_shared<Slot>();
    slot->index = next_index_++;
    slots_.push_back(slot);
    return slot;
  }

  // Gives up the puller role. Returns false if the element is not to be
  // mapped: once cancelled, or at the end of the input, where it drops the
  // reserved slot (still the last: nobody else appends while we pull).
  bool EndPull(const absl::Status& status) {
    MutexLock l(&mu_);
    pulling_ = false;
    if (cancelled_) return false;
    if (IsEnd(status)) {
      input_done_ = true;
      slots_.pop_back();
      ready_cv_.Signal();
      return false;
    }
    work_cv_.Signal();  // Another worker may pull now.
    return true;
  }

  const std::shared_ptr<const MapDataset> ds_;
  const std::unique_ptr<Iterator> input_;  // Used by the puller only.
  const int capacity_;

  Mutex mu_;
  CondVar work_cv_;   // Workers: a slot is free, the puller role is free.
  CondVar ready_cv_;  // Consumer: the front slot is done, or the end.
  std::deque<std::shared_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
  int64_t next_index_ ABSL_GUARDED_BY(mu_) = 0;
  bool pulling_ ABSL_GUARDED_BY(mu_) = false;
  bool input_done_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;

  std::vector<std::thread> workers_;  // Last: started after the rest.
};

std::unique_ptr<Iterator> MapDataset::MakeIterator(
    const IteratorContext& ctx) const {
  auto self = this->self<MapDataset>();
  std::unique_ptr<Iterator> in = input()->MakeIterator(ctx);
  if (num_parallel_calls_ == 1) {
    return std::make_unique<SequentialMapIterator>(self, std::move(in));
  }
  return std::make_unique<ParallelMapIterator>(self, std::move(in));
}

}  // namespace

DatasetPtr Dataset::Map(MapFn fn, int num_parallel_calls,
                        std::optional<ElementSpec> output_spec) const {
  if (!ok()) return shared_from_this();
  auto invalid = [this, num_parallel_calls](const std::string& why) {
    return ErrorDataset(absl::InvalidArgumentError(absl::StrCat(
        DebugString(), ".Map(num_parallel_calls=", num_parallel_calls,
        "): ", why)));
  };
  if (!fn) return invalid("no function given");
  if (num_parallel_calls < 1) {
    return invalid("num_parallel_calls must be >= 1 (1 runs fn in the caller)");
  }
  if (output_spec &&
      (!output_spec->known() ||
       output_spec->dtypes.size() != output_spec->shapes.size())) {
    return invalid(absl::StrCat(
        "output_spec needs one dtype and one shape per component; got ",
        output_spec->dtypes.size(), " dtypes and ", output_spec->shapes.size(),
        " shapes"));
  }
  return std::make_shared<MapDataset>(shared_from_this(), std::move(fn),
                                      num_parallel_calls,
                                      std::move(output_spec));
}

}  // namespace ipuflow::feeds
