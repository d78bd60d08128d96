// Fashion-MNIST as the examples use it: both splits from Debian's
// dataset-fashion-mnist, normalised as the PopTorch tutorials do
// (Normalize((0.5,), (0.5,)): pixels in [-1, 1]).
//
//   ASSIGN_OR_RETURN(TutorialData data, LoadTutorialData(/*train_limit=*/-1,
//                                                        /*test_limit=*/-1));
//   data.train.images;   // float32 [60000, 28, 28, 1]
#ifndef IPUFLOW_EXAMPLES_TUTORIAL_DATA_H_
#define IPUFLOW_EXAMPLES_TUTORIAL_DATA_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "feeds/fashion_mnist.h"

namespace ipuflow::examples {

struct TutorialData {
  feeds::FashionMnistData train;
  feeds::FashionMnistData test;
};

// The first `train_limit` / `test_limit` images of each split (-1: all).
absl::StatusOr<TutorialData> LoadTutorialData(int64_t train_limit,
                                              int64_t test_limit);

}  // namespace ipuflow::examples

#endif  // IPUFLOW_EXAMPLES_TUTORIAL_DATA_H_
