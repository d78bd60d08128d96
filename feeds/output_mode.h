// How an outfeed is configured on either side: OutfeedMode, what the host
// side keeps (kAll: every step until it is dequeued; kLast: only the
// latest), and OutputMode, which device iterations are sent at all.
//
// Output modes (PopTorch's OutputMode, PopTorch user guide "Output modes";
// the table in reference/wave2_reference.md 3.1) choose, on the device
// side, which device iterations of a run are sent at all: All (every one),
// EveryN(n) (iterations n-1, 2n-1, ... with all their GA micro-batches; n
// must divide the run's iterations), Final (each replica's last, sent when
// the run ends), Sum (each replica's sum over the run's iterations and
// micro-batches, not over the batch dimension; sent when the run ends), and
// Default: Final when the program trains (a pipeline with an optimizer, or
// a device program that writes variables), All otherwise. What is not sent
// is not transferred.
#ifndef IPUFLOW_FEEDS_OUTPUT_MODE_H_
#define IPUFLOW_FEEDS_OUTPUT_MODE_H_

#include <cstdint>
#include <string>

namespace ipuflow::feeds {

enum class OutfeedMode { kAll, kLast };

struct OutputMode {
  enum class Kind { kAll, kFinal, kSum, kEveryN, kDefault };
  Kind kind = Kind::kAll;
  int64_t period = 1;  // kEveryN only.
  static OutputMode All() { return {Kind::kAll, 1}; }
  static OutputMode Final() { return {Kind::kFinal, 1}; }
  static OutputMode Sum() { return {Kind::kSum, 1}; }
  static OutputMode EveryN(int64_t n) { return {Kind::kEveryN, n}; }
  static OutputMode Default() { return {Kind::kDefault, 1}; }
  std::string DebugString() const;  // "All", "EveryN(4)", ...
};

// How an enqueue's pushes make device iterations: a device loop pushes once
// per iteration; a pipeline once per micro-batch, `pushes`
// (gradient_accumulation_count) per iteration of the output modes, and with
// `sum` (its accumulate_outfeed) sends the sum of an iteration's pushes at
// its last push.
struct OutfeedIteration {
  int64_t pushes = 1;
  bool sum = false;
};

}  // namespace ipuflow::feeds

#endif  // IPUFLOW_FEEDS_OUTPUT_MODE_H_
