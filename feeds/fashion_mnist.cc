#include "feeds/fashion_mnist.h"

#include "absl/strings/str_cat.h"
#include "core/tensor_eigen.h"
#include "feeds/idx_reader.h"

namespace ipuflow::feeds {
namespace {

constexpr int64_t kSide = 28;

absl::Status CheckOptions(const FashionMnistOptions& o) {
  if (o.limit < -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "FashionMnist: limit must be >= 0, or -1 for all; got ", o.limit));
  }
  if (o.normalize && !(o.stddev > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "FashionMnist: normalize needs stddev > 0; got ", o.stddev));
  }
  return absl::OkStatus();
}

// InvalidArgument naming the first label outside [0, 10).
absl::Status CheckLabels(const Tensor& labels, const std::string& path) {
  const int32_t* l = labels.data<int32_t>();
  for (int64_t i = 0; i < labels.NumElements(); ++i) {
    if (l[i] < 0 || l[i] >= kFashionMnistClasses) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": label ", i, " is ", l[i], ", not in [0, ",
                       kFashionMnistClasses, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FashionMnistData> LoadFashionMnist(
    Split split, const FashionMnistOptions& options) {
  RETURN_IF_ERROR(CheckOptions(options));
  const std::string prefix =
      absl::StrCat(options.dir, "/", split == Split::kTrain ? "train" : "t10k");
  const std::string images_path = prefix + "-images-idx3-ubyte.gz";
  const std::string labels_path = prefix + "-labels-idx1-ubyte.gz";

  IdxReadOptions read;
  read.dtype = DType::kFloat32;
  read.scale = 1.0 / 255;
  read.max_rows = options.limit;
  ASSIGN_OR_RETURN(Tensor images, ReadIdx(images_path, read));
  if (images.rank() != 3 || images.dim(1) != kSide || images.dim(2) != kSide) {
    return absl::InvalidArgumentError(absl::StrCat(images_path, ": images are ",
                                                   images.shape().DebugString(),
                                                   ", expected [N,28,28]"));
  }
  read.dtype = DType::kInt32;
  read.scale = 1.0;
  ASSIGN_OR_RETURN(Tensor labels, ReadIdx(labels_path, read));
  if (labels.rank() != 1 || labels.dim(0) != images.dim(0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(labels_path, ": labels are ", labels.shape().DebugString(),
                     " but the images are ", images.shape().DebugString(),
                     "; expected one label per image"));
  }
  RETURN_IF_ERROR(CheckLabels(labels, labels_path));

  ASSIGN_OR_RETURN(images, images.Reshaped({images.dim(0), kSide, kSide, 1}));
  if (options.normalize) {
    auto x = images.flat<float>();
    x = (x - options.mean) * (1.0f / options.stddev);
  }
  return FashionMnistData{std::move(images), std::move(labels)};
}

DatasetPtr FashionMnist(Split split, const FashionMnistOptions& options) {
  absl::StatusOr<FashionMnistData> data = LoadFashionMnist(split, options);
  if (!data.ok()) return ErrorDataset(data.status());
  return FromTensorSlices({data->images, data->labels});
}

}  // namespace ipuflow::feeds
