// Fashion-MNIST (Zalando's 28x28 grey-scale clothing images, 10 classes) from
// Debian's dataset-fashion-mnist package, as tensors or as a Dataset.
//
//   FashionMnistOptions opts;
//   opts.normalize = true;                    // (x - 0.5) / 0.5, in [-1, 1]
//   DatasetPtr train = FashionMnist(Split::kTrain, opts)
//                          ->Shuffle(60000, /*seed=*/1)
//                          ->Batch(32, /*drop_remainder=*/true);
//   // elements: {float32[32,28,28,1] images, int32[32] labels in 0..9}
//
// Images are scaled from bytes to [0, 1]; `normalize` then applies
// (x - mean) / stddev. The defaults, 0.5 and 0.5, are what PopTorch's
// Fashion-MNIST tutorials use (torchvision Normalize((0.5,), (0.5,))); the
// MNIST pipelining tutorial uses MNIST's own statistics, 0.1307 and 0.3081.
//
// Thread safety: the functions keep no state; call them from any thread.
#ifndef IPUFLOW_FEEDS_FASHION_MNIST_H_
#define IPUFLOW_FEEDS_FASHION_MNIST_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/tensor.h"
#include "feeds/dataset.h"

namespace ipuflow::feeds {

enum class Split { kTrain, kTest };

inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";
inline constexpr int kFashionMnistClasses = 10;
// Index = label.
inline constexpr const char* kFashionMnistClassNames[kFashionMnistClasses] = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

struct FashionMnistOptions {
  // Holds {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz.
  std::string dir = kFashionMnistDir;
  // Only the first `limit` examples (-1: all; 60000 train, 10000 test).
  int64_t limit = -1;
  bool normalize = false;
  float mean = 0.5f;
  float stddev = 0.5f;
};

struct FashionMnistData {
  Tensor images;  // float32 [N, 28, 28, 1]
  Tensor labels;  // int32 [N], in [0, 10)
};

// Loads a split into memory. Errors name the file: NotFound when the package
// is missing (install dataset-fashion-mnist), InvalidArgument for unexpected
// shapes or labels, and ReadIdx's errors for damaged files.
absl::StatusOr<FashionMnistData> LoadFashionMnist(
    Split split, const FashionMnistOptions& options = {});

// The split as a Dataset of {image float32[28,28,1], label int32[]}
// elements; an error is kept in the dataset (see Dataset::status()).
DatasetPtr FashionMnist(Split split, const FashionMnistOptions& options = {});

}  // namespace ipuflow::feeds

#endif  // IPUFLOW_FEEDS_FASHION_MNIST_H_
