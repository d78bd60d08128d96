// IPUIterator: the seed's simplified form of an infeed (section 6.2). Make
// an iterator over a dataset, call Next() inside a device-loop body, and
// each iteration gets the next element; the infeed queue is made behind the
// scenes.
//
//   ASSIGN_OR_RETURN(auto it, IPUIterator::Create(dataset));
//   auto body = [&](const Scope& s, const std::vector<Output>&) {
//     std::vector<Output> x = it->Next(s);  // this iteration's element
//     outfeed->Enqueue(s, {ops::ReduceSum(s, x[0])});
//     return std::vector<Output>{};
//   };
//   ASSIGN_OR_RETURN(loops::Loop loop, loops::Repeat(scope, 100, body));
//   RETURN_IF_ERROR(strategy.Run(*scope.graph(), {}, {loop.op}).status());
//   float total = 0;
//   for (const OutfeedElement& e : *outfeed) {
//     total += e.tensors[0].scalar<float>();
//   }
//
// Thread safety: as IPUInfeedQueue.
#ifndef IPUFLOW_FEEDS_IPU_ITERATOR_H_
#define IPUFLOW_FEEDS_IPU_ITERATOR_H_

#include <memory>
#include <vector>

#include "feeds/infeed_queue.h"

namespace ipuflow::feeds {

class IPUIterator {
 public:
  static absl::StatusOr<std::unique_ptr<IPUIterator>> Create(
      DatasetPtr dataset, int prefetch_depth = kDefaultPrefetchDepth) {
    ASSIGN_OR_RETURN(
        std::unique_ptr<IPUInfeedQueue> queue,
        IPUInfeedQueue::Create(std::move(dataset), prefetch_depth));
    return std::unique_ptr<IPUIterator>(new IPUIterator(std::move(queue)));
  }

  // The next element, dequeued every time the enclosing body runs. Errors
  // are recorded in the scope.
  std::vector<Output> Next(const Scope& scope) {
    absl::StatusOr<std::vector<Output>> element = queue_->BuildDequeue(scope);
    if (!element.ok()) {
      scope.UpdateStatus(element.status());
      return {};
    }
    return *std::move(element);
  }
  IPUInfeedQueue& queue() { return *queue_; }

 private:
  explicit IPUIterator(std::unique_ptr<IPUInfeedQueue> queue)
      : queue_(std::move(queue)) {}
  std::unique_ptr<IPUInfeedQueue> queue_;
};

}  // namespace ipuflow::feeds

#endif  // IPUFLOW_FEEDS_IPU_ITERATOR_H_
