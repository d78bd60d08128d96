#include "core/option_checks.h"

#include <cstdint>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ipuflow {
namespace {

using ::testing::HasSubstr;

enum class Color { kRed, kGreen };

TEST(OptionCheckerTest, RangeNamesOwnerFieldValueAndLimits) {
  OptionChecker c("Opts");
  c.Range("n", 5, 0, 10).Range("m", -1, 0, 10).Range("k", 11, 0, 10);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(),
            "Opts: m is -1; it must be between 0 and 10; k is 11; it must be "
            "between 0 and 10");
}

TEST(OptionCheckerTest, FiniteRangeRefusesNaNAndInfinities) {
  for (double v :
       {std::nan(""), std::numeric_limits<double>::infinity(), -1.0}) {
    OptionChecker c("Opts");
    c.FiniteRange("lr", v, 0, 1e9);
    EXPECT_FALSE(c.ok()) << v;
    EXPECT_THAT(c.status().message(), HasSubstr("lr is "));
  }
  EXPECT_TRUE(OptionChecker("Opts").FiniteRange("lr", 0.5, 0, 1).ok());
}

TEST(OptionCheckerTest, EnumListsTheValidValues) {
  OptionChecker c("Opts");
  c.Enum("color", "Color", static_cast<Color>(7),
         {{Color::kRed, "Red"}, {Color::kGreen, "Green"}});
  EXPECT_EQ(c.status().message(),
            "Opts: color is 7, not a Color (0 Red, 1 Green)");
  EXPECT_TRUE(OptionChecker("Opts")
                  .Enum("color", "Color", Color::kGreen,
                        {{Color::kRed, "Red"}, {Color::kGreen, "Green"}})
                  .ok());
}

TEST(OptionCheckerTest, ProductsAreCheckedInInt64) {
  OptionChecker ok("Opts");
  EXPECT_EQ(ok.Product({{"a", 3}, {"b", 4}}, 12), 12);
  EXPECT_TRUE(ok.ok());
  OptionChecker over("Opts");
  EXPECT_EQ(over.Product({{"a", 3}, {"b", 5}}, 12), 0);
  EXPECT_EQ(over.status().message(),
            "Opts: a x b = 3 x 5 = 15; the limit is 12");
  OptionChecker wrap("Opts");
  const int64_t big = int64_t{1} << 62;
  wrap.Product({{"a", big}, {"b", 4}}, std::numeric_limits<int64_t>::max());
  EXPECT_THAT(wrap.status().message(),
              HasSubstr("a x b = 4611686018427387904 x 4 overflows int64"));
  // A negative factor is its field's range error, not a product.
  OptionChecker neg("Opts");
  neg.Range("a", -1, 0, 10);
  neg.Product({{"a", -1}, {"b", 4}}, 100);
  EXPECT_EQ(neg.status().message(),
            "Opts: a is -1; it must be between 0 and 10");
}

TEST(OptionCheckerTest, CheckedProduct) {
  EXPECT_EQ(*CheckedProduct("x", 6, 7), 42);
  EXPECT_FALSE(CheckedProduct("x", int64_t{1} << 40, int64_t{1} << 40).ok());
}

}  // namespace
}  // namespace ipuflow
