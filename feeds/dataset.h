// Dataset: an immutable, composable description of a stream of elements (a
// tf.data-style input pipeline), and Iterator, one pass over it.
//
//   DatasetPtr ds = FromTensorSlices({images, labels})  // [N,28,28,1], [N]
//                       ->Shuffle(10000, /*seed=*/1)
//                       ->Map(Augment, /*num_parallel_calls=*/4)
//                       ->Batch(32, /*drop_remainder=*/true)
//                       ->Repeat()
//                       ->Prefetch(3);
//   if (!ds->ok()) return ds->status();   // The first error of the chain.
//   std::unique_ptr<Iterator> it = ds->MakeIterator();
//   ASSIGN_OR_RETURN(Element batch, it->GetNext());  // {[32,28,28,1], [32]}
//
// Errors made while building (a bad argument, mismatched slices) are kept in
// the dataset like a Scope keeps them: every transformation of a failed
// dataset returns it unchanged, status() reports the first error, and its
// iterators return that error. So a chain is checked once, at its end.
//
// An element is a tuple of tensors. Elements share buffers with the tensors
// they come from (FromTensorSlices yields zero-copy views): treat them as
// read-only, and Copy() a tensor before writing to it.
//
// Thread safety: a Dataset is immutable; share it (std::shared_ptr<const
// Dataset>) and call any method from any thread. An Iterator is used by one
// thread at a time; it may run threads of its own (Map, Prefetch), which it
// stops and joins in its destructor, whatever they are blocked on. An
// iterator keeps its dataset alive. User functions (Map, FromGenerator) may
// run on those threads, several at once for Map(fn, n > 1): they must be
// thread-safe. Everything a worker thread wrote into an element
// happens-before GetNext returns that element to the caller.
#ifndef IPUFLOW_FEEDS_DATASET_H_
#define IPUFLOW_FEEDS_DATASET_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/tensor.h"

namespace ipuflow::feeds {

using Element = std::vector<Tensor>;

// The dtypes and shapes of the components of every element of a dataset.
// A dimension is kUnknownDim where elements may differ (the batch dimension
// of Batch without drop_remainder). An empty spec means "unknown" (Map with
// no declared output spec): datasets never hold zero-component elements.
struct ElementSpec {
  std::vector<DType> dtypes;
  std::vector<TensorShape> shapes;

  static ElementSpec Of(const Element& element);
  int size() const { return static_cast<int>(dtypes.size()); }
  bool known() const { return !dtypes.empty(); }
  // OK if `element` has the spec's components, dtypes and compatible
  // shapes; otherwise InvalidArgument naming `who`, the element's `index`
  // and the first mismatch. An unknown spec accepts everything.
  absl::Status Check(const Element& element, const std::string& who,
                     int64_t index) const;
  // "(float32[28,28,1], int32[])"; "(unknown)".
  std::string DebugString() const;
};

// Values of Dataset::Cardinality() besides a count.
inline constexpr int64_t kInfiniteCardinality = -1;
inline constexpr int64_t kUnknownCardinality = -2;

// One pass over a dataset. Not thread-safe (see the file comment).
class Iterator {
 public:
  virtual ~Iterator() = default;
  // The next element; OutOfRange at the end (and on every call after it).
  // Any other error is the error of that element, returned in its place:
  // the caller may stop, or call again for the elements after it.
  virtual absl::StatusOr<Element> GetNext() = 0;
};

// What a Repeat tells the passes it makes over its input: a fresh
// MakeIterator() starts from epoch 0, each further pass of a Repeat derives
// a new epoch, and Shuffle mixes the epoch into its seed. Iteration is thus
// deterministic, yet reshuffled on every pass.
struct IteratorContext {
  uint64_t epoch = 0;
};

class Dataset;
using DatasetPtr = std::shared_ptr<const Dataset>;
using MapFn = std::function<absl::StatusOr<Element>(Element)>;

class Dataset : public std::enable_shared_from_this<Dataset> {
 public:
  virtual ~Dataset() = default;
  Dataset(const Dataset&) = delete;
  Dataset& operator=(const Dataset&) = delete;

  const ElementSpec& spec() const { return spec_; }
  const absl::Status& status() const { return status_; }
  bool ok() const { return status_.ok(); }
  // The number of elements, kInfiniteCardinality or kUnknownCardinality.
  virtual int64_t Cardinality() const = 0;
  // True if a pass can end only if the dataset is empty: an unbounded
  // Repeat() in its chain not cut by a Take. Known without reading it, where
  // the cardinality may be unknown (Repeat() of a generator). Datasets of
  // several inputs answer false.
  virtual bool RepeatsForever() const { return false; }
  // At most this many elements in a pass, known without reading it: the
  // cardinality where it is known, a Take(n)'s n over a dataset of unknown
  // size; -1 when no bound is known (a generator, a Filter, a Map over a
  // Take). What lets a DataLoader count a dataset of unknown size.
  virtual int64_t CardinalityBound() const {
    const int64_t c = Cardinality();
    return c >= 0 ? c : -1;
  }
  // The chain that built this dataset: "Range(0, 6).Shard(2, 1).Repeat(2)".
  virtual std::string DebugString() const = 0;
  // The dataset whose elements this one yields one for one and in order,
  // pass after pass (Map, Prefetch, Repeat, Take); null for the others.
  // What an infeed follows to the DataLoader behind it (DataLoader::Behind):
  // through these, its n-th element is the loader's n-th micro-batch.
  virtual const Dataset* ordered_input() const { return nullptr; }

  // Starts a pass. Datasets built on others call the overload with their
  // own context when they iterate their input.
  std::unique_ptr<Iterator> MakeIterator() const { return MakeIterator({}); }
  virtual std::unique_ptr<Iterator> MakeIterator(
      const IteratorContext& ctx) const = 0;

  // Transformations. Each returns a new dataset over this one (REQUIRES:
  // this dataset is owned by a shared_ptr, as every factory here makes it).

  // Applies `fn` to every element. With num_parallel_calls > 1, that many
  // threads run fn concurrently, at most 2 * num_parallel_calls elements
  // ahead of the consumer; the output keeps the input's order, and fn's
  // errors come back in their element's place. num_parallel_calls == 1 runs
  // fn in the caller of GetNext. If `output_spec` is given, every output is
  // checked against it (InvalidArgument on mismatch); otherwise the spec of
  // the result is unknown.
  DatasetPtr Map(MapFn fn, int num_parallel_calls = 1,
                 std::optional<ElementSpec> output_spec = std::nullopt) const;
  // Stacks `batch_size` consecutive elements along a new dimension 0. The
  // last batch is smaller unless `drop_remainder`, which drops it. Elements
  // of a batch must have equal shapes.
  DatasetPtr Batch(int64_t batch_size, bool drop_remainder = false) const;
  // `count` passes over this dataset; -1 repeats forever (a pass that yields
  // nothing ends it, so an empty dataset never spins).
  DatasetPtr Repeat(int64_t count = -1) const;
  // Yields a random permutation of each window: a buffer of `buffer_size`
  // elements from which a random one is taken and refilled from the input.
  // Deterministic for a seed; reshuffled on every pass of an outer Repeat.
  DatasetPtr Shuffle(int64_t buffer_size, uint64_t seed = 0) const;
  // The first `count` elements (-1: all).
  DatasetPtr Take(int64_t count) const;
  // All but the first `count` elements (-1: skips everything).
  DatasetPtr Skip(int64_t count) const;
  // Elements whose position p satisfies p % num_shards == index.
  DatasetPtr Shard(int64_t num_shards, int64_t index) const;
  // A background thread keeps up to `buffer_size` elements ready.
  DatasetPtr Prefetch(int64_t buffer_size) const;

 protected:
  explicit Dataset(ElementSpec spec, absl::Status status = absl::OkStatus())
      : spec_(std::move(spec)), status_(std::move(status)) {}

 private:
  ElementSpec spec_;
  absl::Status status_;
};

// Sources.

// One element.
DatasetPtr FromTensors(Element element);
// Element i is {components[0][i], components[1][i], ...}: each component is
// sliced along dimension 0, and all must have the same dim-0 size.
DatasetPtr FromTensorSlices(Element components);
// int64 scalars start, start + step, ... up to `stop` (excluded).
DatasetPtr Range(int64_t start, int64_t stop, int64_t step = 1);

// Called once per pass; returns the function that yields that pass's
// elements, one per call, and OutOfRange at the end.
using GeneratorFactory =
    std::function<std::function<absl::StatusOr<Element>()>()>;
// Elements from user code; each is checked against `spec` (which must be
// known). `cardinality` is reported as is.
DatasetPtr FromGenerator(ElementSpec spec, GeneratorFactory make_generator,
                         int64_t cardinality = kUnknownCardinality);

// A dataset whose status() is `status` (not OK) and whose iterators return
// it. What every factory returns for a bad argument.
DatasetPtr ErrorDataset(absl::Status status);

// Every element of `dataset`, or at most `max_elements` (-1: all; an
// infinite dataset needs a limit). The first error stops it.
absl::StatusOr<std::vector<Element>> Collect(const DatasetPtr& dataset,
                                             int64_t max_elements = -1);

}  // namespace ipuflow::feeds

#endif  // IPUFLOW_FEEDS_DATASET_H_
