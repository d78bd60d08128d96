// ElementSpec, the source datasets (FromTensors, FromTensorSlices, Range,
// FromGenerator, ErrorDataset) and Collect. The transformations live in
// dataset_ops.cc, shuffle_dataset.cc, map_dataset.cc and prefetch_dataset.cc.
#include "feeds/dataset.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "feeds/dataset_internal.h"

namespace ipuflow::feeds {
namespace {

using internal::EndOfSequence;
using internal::IsEnd;

std::string TensorType(DType dtype, const TensorShape& shape) {
  return absl::StrCat(DTypeName(dtype), shape.DebugString());
}

class ErrorIterator : public Iterator {
 public:
  explicit ErrorIterator(absl::Status status) : status_(std::move(status)) {}
  absl::StatusOr<Element> GetNext() override { return status_; }

 private:
  absl::Status status_;
};

class ErrorDatasetImpl : public Dataset {
 public:
  explicit ErrorDatasetImpl(absl::Status status)
      : Dataset(ElementSpec(), std::move(status)) {}
  int64_t Cardinality() const override { return kUnknownCardinality; }
  std::string DebugString() const override {
    return absl::StrCat("Error(", status().ToString(), ")");
  }
  std::unique_ptr<Iterator> MakeIterator(
      const IteratorContext&) const override {
    return std::make_unique<ErrorIterator>(status());
  }
};

// Yields elements [0, n) of a dataset that computes element i on demand.
template <typename D>
class IndexedIterator : public Iterator {
 public:
  explicit IndexedIterator(std::shared_ptr<const D> dataset)
      : dataset_(std::move(dataset)) {}
  absl::StatusOr<Element> GetNext() override {
    if (next_ >= dataset_->Cardinality()) return EndOfSequence();
    return dataset_->ElementAt(next_++);
  }

 private:
  std::shared_ptr<const D> dataset_;
  int64_t next_ = 0;
};

class TensorsDataset : public Dataset {
 public:
  explicit TensorsDataset(Element element)
      : Dataset(ElementSpec::Of(element)), element_(std::move(element)) {}
  int64_t Cardinality() const override { return 1; }
  std::string DebugString() const override {
    return absl::StrCat("FromTensors", spec().DebugString());
  }
  std::unique_ptr<Iterator> MakeIterator(
      const IteratorContext&) const override {
    return std::make_unique<IndexedIterator<TensorsDataset>>(
        std::static_pointer_cast<const TensorsDataset>(shared_from_this()));
  }
  Element ElementAt(int64_t) const { return element_; }

 private:
  Element element_;
};

ElementSpec SliceSpec(const Element& components) {
  ElementSpec spec = ElementSpec::Of(components);
  for (TensorShape& s : spec.shapes) s.RemoveDim(0);
  return spec;
}

class SlicesDataset : public Dataset {
 public:
  explicit SlicesDataset(Element components)
      : Dataset(SliceSpec(components)), components_(std::move(components)) {}
  int64_t Cardinality() const override { return components_[0].dim(0); }
  std::string DebugString() const override {
    return absl::StrCat("FromTensorSlices(", Cardinality(), " x ",
                        spec().DebugString(), ")");
  }
  std::unique_ptr<Iterator> MakeIterator(
      const IteratorContext&) const override {
    return std::make_unique<IndexedIterator<SlicesDataset>>(
        std::static_pointer_cast<const SlicesDataset>(shared_from_this()));
  }
  // Zero-copy views of row i of every component.
  Element ElementAt(int64_t i) const {
    Element e;
    e.reserve(components_.size());
    for (size_t c = 0; c < components_.size(); ++c) {
      e.push_back(*components_[c].Slice(i, i + 1).Reshaped(spec().shapes[c]));
    }
    return e;
  }

 private:
  Element components_;
};

// How many of start, start + step, ... lie before `stop`, in unsigned
// arithmetic: the distance and the step's magnitude always fit in 64 bits
// (Range(0, INT64_MAX) has INT64_MAX elements; Range(INT64_MIN, INT64_MAX)
// more than an int64 counts, which Range refuses).
uint64_t RangeCount(int64_t start, int64_t stop, int64_t step) {
  const bool up = step > 0;
  if (up ? stop <= start : stop >= start) return 0;
  const uint64_t span =
      up ? static_cast<uint64_t>(stop) - static_cast<uint64_t>(start)
         : static_cast<uint64_t>(start) - static_cast<uint64_t>(stop);
  const uint64_t magnitude = up ? static_cast<uint64_t>(step)
                                : uint64_t{0} - static_cast<uint64_t>(step);
  return span / magnitude + (span % magnitude != 0 ? 1 : 0);
}

class RangeDataset : public Dataset {
 public:
  RangeDataset(int64_t start, int64_t stop, int64_t step)
      : Dataset(ElementSpec{{DType::kInt64}, {TensorShape()}}),
        start_(start),
        stop_(stop),
        step_(step),
        count_(static_cast<int64_t>(RangeCount(start, stop, step))) {}
  int64_t Cardinality() const override { return count_; }
  std::string DebugString() const override {
    return step_ == 1
               ? absl::StrCat("Range(", start_, ", ", stop_, ")")
               : absl::StrCat("Range(", start_, ", ", stop_, ", ", step_, ")");
  }
  std::unique_ptr<Iterator> MakeIterator(
      const IteratorContext&) const override {
    return std::make_unique<IndexedIterator<RangeDataset>>(
        std::static_pointer_cast<const RangeDataset>(shared_from_this()));
  }
  Element ElementAt(int64_t i) const {
    // start + i * step lies in [start, stop); its intermediate product may
    // not fit an int64 (a step of 2^62 from INT64_MIN): wrap in unsigned.
    return {Tensor::Scalar<int64_t>(static_cast<int64_t>(
        static_cast<uint64_t>(start_) +
        static_cast<uint64_t>(i) * static_cast<uint64_t>(step_)))};
  }

 private:
  int64_t start_, stop_, step_;
  int64_t count_;
};

class GeneratorDataset : public Dataset {
 public:
  GeneratorDataset(ElementSpec spec, GeneratorFactory factory,
                   int64_t cardinality)
      : Dataset(std::move(spec)),
        factory_(std::move(factory)),
        cardinality_(cardinality) {}
  int64_t Cardinality() const override { return cardinality_; }
  std::string DebugString() const override {
    return absl::StrCat("FromGenerator", spec().DebugString());
  }
  std::unique_ptr<Iterator> MakeIterator(const IteratorContext&) const override;

 private:
  class GeneratorIterator;
  GeneratorFactory factory_;
  int64_t cardinality_;
};

class GeneratorDataset::GeneratorIterator : public Iterator {
 public:
  explicit GeneratorIterator(std::shared_ptr<const GeneratorDataset> dataset)
      : dataset_(std::move(dataset)), next_(dataset_->factory_()) {}
  absl::StatusOr<Element> GetNext() override {
    if (done_) return EndOfSequence();
    absl::StatusOr<Element> e = next_();
    if (IsEnd(e.status())) {
      done_ = true;
      return EndOfSequence();
    }
    const int64_t index = index_++;
    if (!e.ok()) return e;
    RETURN_IF_ERROR(dataset_->spec().Check(*e, dataset_->DebugString(), index));
    return e;
  }

 private:
  std::shared_ptr<const GeneratorDataset> dataset_;
  std::function<absl::StatusOr<Element>()> next_;
  int64_t index_ = 0;
  bool done_ = false;
};

std::unique_ptr<Iterator> GeneratorDataset::MakeIterator(
    const IteratorContext&) const {
  return std::make_unique<GeneratorIterator>(
      std::static_pointer_cast<const GeneratorDataset>(shared_from_this()));
}

// InvalidArgument unless `element` is a non-empty tuple of valid, non-resource
// tensors.
absl::Status CheckSourceElement(const Element& element, const char* who) {
  if (element.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": an element needs at least one tensor"));
  }
  for (size_t i = 0; i < element.size(); ++i) {
    if (!element[i].valid() || element[i].dtype() == DType::kResource) {
      return absl::InvalidArgumentError(absl::StrCat(
          who, ": component ", i, " is ",
          element[i].valid() ? "a resource handle" : "an invalid tensor",
          "; elements hold data tensors"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

ElementSpec ElementSpec::Of(const Element& element) {
  ElementSpec spec;
  for (const Tensor& t : element) {
    spec.dtypes.push_back(t.dtype());
    spec.shapes.push_back(t.shape());
  }
  return spec;
}

absl::Status ElementSpec::Check(const Element& element, const std::string& who,
                                int64_t index) const {
  if (!known()) return absl::OkStatus();
  if (static_cast<int>(element.size()) != size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        who, ": element ", index, " has ", element.size(),
        " components but the spec ", DebugString(), " has ", size()));
  }
  for (int c = 0; c < size(); ++c) {
    const Tensor& t = element[c];
    if (t.dtype() != dtypes[c] || !shapes[c].IsCompatibleWith(t.shape())) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, ": element ", index, " component ", c, " is ",
                       TensorType(t.dtype(), t.shape()), " but the spec says ",
                       TensorType(dtypes[c], shapes[c])));
    }
  }
  return absl::OkStatus();
}

std::string ElementSpec::DebugString() const {
  if (!known()) return "(unknown)";
  std::vector<std::string> parts;
  for (int c = 0; c < size(); ++c) {
    parts.push_back(TensorType(dtypes[c], shapes[c]));
  }
  return absl::StrCat("(", absl::StrJoin(parts, ", "), ")");
}

DatasetPtr ErrorDataset(absl::Status status) {
  if (status.ok()) {
    status = absl::InternalError("ErrorDataset made with an OK status");
  }
  return std::make_shared<ErrorDatasetImpl>(std::move(status));
}

DatasetPtr FromTensors(Element element) {
  absl::Status s = CheckSourceElement(element, "FromTensors");
  if (!s.ok()) return ErrorDataset(s);
  return std::make_shared<TensorsDataset>(std::move(element));
}

DatasetPtr FromTensorSlices(Element components) {
  absl::Status s = CheckSourceElement(components, "FromTensorSlices");
  if (!s.ok()) return ErrorDataset(s);
  for (size_t i = 0; i < components.size(); ++i) {
    const Tensor& t = components[i];
    if (t.rank() == 0 || t.dim(0) != components[0].dim(0)) {
      std::vector<std::string> all;
      for (const Tensor& c : components) {
        all.push_back(TensorType(c.dtype(), c.shape()));
      }
      return ErrorDataset(absl::InvalidArgumentError(absl::StrCat(
          "FromTensorSlices: ",
          t.rank() == 0 ? absl::StrCat("component ", i, " is a scalar")
                        : "components differ in size along dimension 0",
          "; every component is sliced along dimension 0, so all need the "
          "same dim-0 size: ",
          absl::StrJoin(all, ", "))));
    }
  }
  return std::make_shared<SlicesDataset>(std::move(components));
}

DatasetPtr Range(int64_t start, int64_t stop, int64_t step) {
  if (step == 0) {
    return ErrorDataset(absl::InvalidArgumentError(absl::StrCat(
        "Range(", start, ", ", stop, ", ", step, "): step must not be 0")));
  }
  if (RangeCount(start, stop, step) >
      static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return ErrorDataset(absl::InvalidArgumentError(
        absl::StrCat("Range(", start, ", ", stop, ", ", step,
                     "): more elements than an int64 counts")));
  }
  return std::make_shared<RangeDataset>(start, stop, step);
}

DatasetPtr FromGenerator(ElementSpec spec, GeneratorFactory make_generator,
                         int64_t cardinality) {
  if (!spec.known() || spec.shapes.size() != spec.dtypes.size()) {
    return ErrorDataset(absl::InvalidArgumentError(absl::StrCat(
        "FromGenerator: the spec needs one dtype and one shape per component; "
        "got ",
        spec.dtypes.size(), " dtypes and ", spec.shapes.size(), " shapes")));
  }
  if (!make_generator) {
    return ErrorDataset(
        absl::InvalidArgumentError("FromGenerator: no generator given"));
  }
  if (cardinality < kUnknownCardinality) {
    return ErrorDataset(absl::InvalidArgumentError(absl::StrCat(
        "FromGenerator: cardinality ", cardinality,
        " must be >= 0, kInfiniteCardinality or kUnknownCardinality")));
  }
  return std::make_shared<GeneratorDataset>(
      std::move(spec), std::move(make_generator), cardinality);
}

absl::StatusOr<std::vector<Element>> Collect(const DatasetPtr& dataset,
                                             int64_t max_elements) {
  RETURN_IF_ERROR(dataset->status());
  if (max_elements < 0 && dataset->Cardinality() == kInfiniteCardinality) {
    return absl::InvalidArgumentError(
        absl::StrCat("Collect: ", dataset->DebugString(),
                     " is infinite; pass max_elements or Take() first"));
  }
  std::vector<Element> out;
  std::unique_ptr<Iterator> it = dataset->MakeIterator();
  while (max_elements < 0 || static_cast<int64_t>(out.size()) < max_elements) {
    absl::StatusOr<Element> e = it->GetNext();
    if (IsEnd(e.status())) break;
    if (!e.ok()) return e.status();
    out.push_back(*std::move(e));
  }
  return out;
}

namespace internal {

absl::Status CheckBufferSize(const Dataset& ds, const std::string& call,
                             int64_t n) {
  auto refuse = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat(ds.DebugString(), ".", call, ": ", why));
  };
  if (n > kMaxBufferedElements) {
    return refuse(absl::StrCat(n, " elements exceed the limit of ",
                               kMaxBufferedElements,
                               " elements a dataset may hold at once"));
  }
  // Bytes, when every component's shape is known: n x element bytes must
  // fit in the machine's physical memory (overflow-checked).
  const ElementSpec& spec = ds.spec();
  if (!spec.known()) return absl::OkStatus();
  int64_t element_bytes = 0;
  for (int c = 0; c < spec.size(); ++c) {
    if (!spec.shapes[c].IsFullyDefined()) return absl::OkStatus();
    int64_t bytes = static_cast<int64_t>(DTypeSize(spec.dtypes[c]));
    for (int d = 0; d < spec.shapes[c].rank(); ++d) {
      if (__builtin_mul_overflow(bytes, spec.shapes[c].dim(d), &bytes)) {
        return refuse("an element's size overflows int64");
      }
    }
    if (__builtin_add_overflow(element_bytes, bytes, &element_bytes)) {
      return refuse("an element's size overflows int64");
    }
  }
  const int64_t pages = sysconf(_SC_PHYS_PAGES);
  const int64_t page = sysconf(_SC_PAGESIZE);
  int64_t limit = 0;
  if (pages <= 0 || page <= 0 || __builtin_mul_overflow(pages, page, &limit)) {
    return absl::OkStatus();  // Unknown: the element count bound holds.
  }
  int64_t total = 0;
  if (__builtin_mul_overflow(element_bytes, n, &total) || total > limit) {
    return refuse(absl::StrCat(n, " elements of ", element_bytes,
                               " bytes exceed the machine's physical memory (",
                               limit, " bytes)"));
  }
  return absl::OkStatus();
}

}  // namespace internal

}  // namespace ipuflow::feeds
