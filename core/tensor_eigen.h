// Eigen views of a Tensor's elements: what Tensor::flat<T>() and
// matrix<T>(rows, cols) return. Kept out of core/tensor.h so that only the
// files that compute through Eigen pay for parsing it.
//
//   Tensor t = Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2});
//   float sum = t.flat<float>().sum();               // 10
//   float corner = t.matrix<float>(2, 2)(1, 1);      // 4
#ifndef IPUFLOW_CORE_TENSOR_EIGEN_H_
#define IPUFLOW_CORE_TENSOR_EIGEN_H_

#include <cstdint>

#include "Eigen/Core"
#include "core/half.h"
#include "core/tensor.h"

namespace ipuflow {

template <typename T>
struct EigenViews {
  using FlatMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
  using MatrixMap = Eigen::Map<
      Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
  static FlatMap Flat(T* data, int64_t n) { return FlatMap(data, n); }
  static MatrixMap Matrix(T* data, int64_t rows, int64_t cols) {
    return MatrixMap(data, rows, cols);
  }
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_TENSOR_EIGEN_H_
