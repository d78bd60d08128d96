#include "feeds/dataset_benchmark.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ipuflow::feeds {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// n elements of {float32[64]} = 256 bytes each.
DatasetPtr Floats(int64_t n) {
  return FromTensorSlices({Tensor::Filled(DType::kFloat32, {n, 64}, 1.0)});
}

TEST(DatasetBenchmarkTest, JsonParsesBackWithTheOriginalKeys) {
  absl::StatusOr<std::string> json = DatasetBenchmark(Floats(300), 3, 100);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, StartsWith("{\"epochs\":[{\"elements_processed\":100,"
                                "\"total_bytes_processed\":25600,"
                                "\"time_elapsed\":"));

  // As generic JSON: the keys a Python user's json.loads would see.
  google::protobuf::Struct generic;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(*json, &generic).ok());
  const auto& epochs = generic.fields().at("epochs").list_value();
  ASSERT_EQ(epochs.values_size(), 3);
  for (const char* key : {"elements_processed", "total_bytes_processed",
                          "time_elapsed", "elements_per_second", "bandwidth"}) {
    EXPECT_EQ(epochs.values(2).struct_value().fields().count(key), 1u) << key;
  }

  // As the message: the numbers agree with each other.
  DatasetBenchmarkResult result;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(*json, &result).ok());
  ASSERT_EQ(result.epochs_size(), 3);
  for (const DatasetBenchmarkEpoch& e : result.epochs()) {
    EXPECT_EQ(e.elements_processed(), 100);
    EXPECT_EQ(e.total_bytes_processed(), 25600);
    EXPECT_GT(e.time_elapsed(), 0);
    EXPECT_NEAR(e.elements_per_second(), 100 / e.time_elapsed(),
                1e-6 * e.elements_per_second());
    // GB/s: bytes / (1e9 * seconds).
    EXPECT_NEAR(e.bandwidth(), 25600 / (1e9 * e.time_elapsed()),
                1e-6 * e.bandwidth());
  }
}

TEST(DatasetBenchmarkTest, TooShortKnownDatasetFailsUpFront) {
  absl::StatusOr<std::string> json = DatasetBenchmark(Floats(250), 3, 100);
  EXPECT_EQ(json.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(json.status().message(), HasSubstr("has 250 elements"));
  EXPECT_THAT(json.status().message(),
              HasSubstr("number_of_epochs (3) x elements_per_epoch (100) = "
                        "300 elements"));
  // Repeating makes it long enough.
  EXPECT_TRUE(DatasetBenchmark(Floats(250)->Repeat(), 3, 100).ok());
}

TEST(DatasetBenchmarkTest, TooShortUnknownDatasetFailsWhenItEnds) {
  // A generator's length is unknown until it ends.
  DatasetPtr ds =
      FromGenerator(ElementSpec{{DType::kInt64}, {TensorShape()}}, [] {
        auto i = std::make_shared<int64_t>(0);
        return [i]() -> absl::StatusOr<Element> {
          if (*i == 250) return absl::OutOfRangeError("end");
          return Element{Tensor::Scalar<int64_t>((*i)++)};
        };
      });
  absl::StatusOr<std::string> json = DatasetBenchmark(ds, 3, 100);
  EXPECT_EQ(json.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(json.status().message(),
              HasSubstr("ended after 250 elements (epoch 3 of 3)"));
  EXPECT_THAT(json.status().message(), HasSubstr("= 300 elements"));
}

TEST(DatasetBenchmarkTest, BadArgumentsAndElementErrors) {
  EXPECT_EQ(DatasetBenchmark(Floats(10), 0, 5).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DatasetBenchmark(Floats(10), 1, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DatasetBenchmark(nullptr, 1, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  DatasetPtr broken = Range(0, 1)->Shard(1, 1);
  EXPECT_EQ(DatasetBenchmark(broken, 1, 1).status(), broken->status());
  DatasetPtr failing =
      Range(0, 10)->Map([](Element e) -> absl::StatusOr<Element> {
        if (e[0].scalar<int64_t>() == 7) return absl::DataLossError("bad");
        return e;
      });
  absl::StatusOr<std::string> json = DatasetBenchmark(failing, 2, 5);
  EXPECT_EQ(json.status().code(), absl::StatusCode::kDataLoss);
  // Which element of which epoch, then the Map's own error (naming itself).
  EXPECT_THAT(std::string(json.status().message()),
              ::testing::AllOf(HasSubstr("element 2 of epoch 2: "),
                               HasSubstr("Map"), ::testing::EndsWith(": bad")));
}

TEST(DatasetBenchmarkTest, PrintStatsLogsEachEpoch) {
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(DatasetBenchmark(Floats(20), 2, 10, /*print_stats=*/true,
                               /*do_memcpy=*/false)
                  .ok());
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, HasSubstr("epoch 1/2: 10 elements"));
  EXPECT_THAT(log, HasSubstr("epoch 2/2: 10 elements"));
  EXPECT_THAT(log, HasSubstr("GB/s"));
}

}  // namespace
}  // namespace ipuflow::feeds
