// Helpers for the dataset tests: flatten int64 elements to plain vectors.
//
//   EXPECT_THAT(Ints(Range(0, 6)->Shard(2, 1)), ElementsAre(1, 3, 5));
//
// Thread safety: stateless.
#ifndef IPUFLOW_FEEDS_DATASET_TEST_UTIL_H_
#define IPUFLOW_FEEDS_DATASET_TEST_UTIL_H_

#include <cstdint>
#include <vector>

#include "feeds/dataset.h"
#include "gtest/gtest.h"

namespace ipuflow::feeds::testing {

// Component `component` of every element (of any numeric dtype),
// flattened and concatenated; max_elements as in Collect. A failing Collect
// fails the test and returns what was read before the error.
inline std::vector<int64_t> Ints(const DatasetPtr& ds,
                                 int64_t max_elements = -1, int component = 0) {
  std::vector<int64_t> out;
  absl::StatusOr<std::vector<Element>> all = Collect(ds, max_elements);
  EXPECT_TRUE(all.ok()) << all.status();
  if (!all.ok()) return out;
  for (const Element& e : *all) {
    const Tensor& t = e[component];
    for (int64_t i = 0; i < t.NumElements(); ++i) {
      // Integers exactly (a double holds 53 bits).
      out.push_back(t.dtype() == DType::kInt64 ? t.data<int64_t>()[i]
                    : t.dtype() == DType::kInt32
                        ? t.data<int32_t>()[i]
                        : static_cast<int64_t>(t.ElementAsDouble(i)));
    }
  }
  return out;
}

// The int64 scalar of element `e`'s first component.
inline int64_t Int(const Element& e) { return e[0].scalar<int64_t>(); }

}  // namespace ipuflow::feeds::testing

#endif  // IPUFLOW_FEEDS_DATASET_TEST_UTIL_H_
