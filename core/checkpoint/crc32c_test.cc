#include "core/checkpoint/crc32c.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ipuflow::checkpoint {
namespace {

// RFC 3720 appendix B.4 and the common check value.
TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xFF), up(32), down(32);
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<uint8_t>(i);
    down[i] = static_cast<uint8_t>(31 - i);
  }
  EXPECT_EQ(Crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(up.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(down.data(), 32), 0x113FDB5Cu);
  EXPECT_EQ(Crc32cExtendPortable(0, "123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32c(nullptr, 0), 0u);
}

TEST(Crc32cTest, HardwareEqualsTablesAtEveryLengthAndAlignment) {
  std::mt19937 rng(7);
  std::vector<uint8_t> data(4096 + 64);
  for (uint8_t& b : data) b = static_cast<uint8_t>(rng());
  for (size_t offset = 0; offset < 9; ++offset) {
    for (size_t n : {0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 4096}) {
      EXPECT_EQ(Crc32c(data.data() + offset, n),
                Crc32cExtendPortable(0, data.data() + offset, n))
          << "offset " << offset << " length " << n;
    }
  }
}

TEST(Crc32cTest, ExtendEqualsOnePass) {
  const std::string s = "The quick brown fox jumps over the lazy dog, twice.";
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    EXPECT_EQ(
        Crc32cExtend(Crc32c(s.data(), cut), s.data() + cut, s.size() - cut),
        Crc32c(s.data(), s.size()));
  }
}

TEST(Crc32cTest, EverySingleBitFlipChangesTheValue) {
  std::vector<uint8_t> data(256);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i);
  const uint32_t c = Crc32c(data.data(), data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    for (int b = 0; b < 8; ++b) {
      data[i] ^= 1 << b;
      EXPECT_NE(Crc32c(data.data(), data.size()), c) << i << ":" << b;
      data[i] ^= 1 << b;
    }
  }
}

}  // namespace
}  // namespace ipuflow::checkpoint
