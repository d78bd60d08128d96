#include "feeds/idx_reader.h"

#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ipuflow::feeds {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

// An IDX file: magic, big-endian dims, then `payload` as is.
std::string IdxBytes(uint8_t type, const std::vector<uint32_t>& dims,
                     const std::string& payload) {
  std::string s = {0, 0, static_cast<char>(type),
                   static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) {
      s.push_back(static_cast<char>((d >> shift) & 0xff));
    }
  }
  return s + payload;
}

std::string WriteFile(const std::string& name, const std::string& bytes,
                      bool gzip = false) {
  const std::string path = TmpPath(name);
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    EXPECT_EQ(gzwrite(f, bytes.data(), bytes.size()),
              static_cast<int>(bytes.size()));
    gzclose(f);
  } else {
    FILE* f = std::fopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
  return path;
}

std::string ReadRaw(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  std::string s;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) s.append(buf, n);
  std::fclose(f);
  return s;
}

TEST(IdxReaderTest, Uint8ScaledToFloat) {
  const std::string path = WriteFile(
      "u8.idx",
      IdxBytes(0x08, {2, 3}, {0, 51, 102, char(153), char(204), char(255)}));
  IdxReadOptions opts;
  opts.scale = 1.0 / 255;
  absl::StatusOr<Tensor> t = ReadIdx(path, opts);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype(), DType::kFloat32);
  EXPECT_EQ(t->shape(), TensorShape({2, 3}));
  EXPECT_THAT(t->ToVector<float>(),
              ElementsAre(0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 1.0f));
}

TEST(IdxReaderTest, GzippedLabelsAsInt32AndInt64) {
  const std::string path = WriteFile(
      "labels.idx.gz", IdxBytes(0x08, {4}, {9, 0, 3, 7}), /*gzip=*/true);
  EXPECT_NE(ReadRaw(path).substr(0, 2), std::string("\0\0", 2));  // Really gz.
  IdxReadOptions opts;
  opts.dtype = DType::kInt32;
  absl::StatusOr<Tensor> t = ReadIdx(path, opts);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->ToVector<int32_t>(), ElementsAre(9, 0, 3, 7));
  opts.dtype = DType::kInt64;
  t = ReadIdx(path, opts);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->ToVector<int64_t>(), ElementsAre(9, 0, 3, 7));
}

TEST(IdxReaderTest, WiderTypesAreBigEndian) {
  IdxReadOptions as_int;
  as_int.dtype = DType::kInt32;
  // int16: 0x0102 = 258, 0xFFFE = -2.
  std::string path =
      WriteFile("i16.idx", IdxBytes(0x0B, {2}, {1, 2, char(0xFF), char(0xFE)}));
  EXPECT_THAT(ReadIdx(path, as_int)->ToVector<int32_t>(), ElementsAre(258, -2));
  // int8: 0xFF = -1.
  path = WriteFile("i8.idx", IdxBytes(0x09, {2}, {char(0xFF), 5}));
  EXPECT_THAT(ReadIdx(path, as_int)->ToVector<int32_t>(), ElementsAre(-1, 5));
  // int32: 0x00010000 = 65536.
  path = WriteFile("i32.idx", IdxBytes(0x0C, {1}, std::string("\0\1\0\0", 4)));
  EXPECT_THAT(ReadIdx(path, as_int)->ToVector<int32_t>(), ElementsAre(65536));
  // float32 1.5 = 0x3FC00000; float64 -2.25 = 0xC002000000000000.
  path =
      WriteFile("f32.idx", IdxBytes(0x0D, {1}, std::string("\x3F\xC0\0\0", 4)));
  EXPECT_THAT(ReadIdx(path)->ToVector<float>(), ElementsAre(1.5f));
  path = WriteFile("f64.idx", IdxBytes(0x0E, {1, 1},
                                       std::string("\xC0\x02\0\0\0\0\0\0", 8)));
  EXPECT_THAT(ReadIdx(path)->ToVector<float>(), ElementsAre(-2.25f));
}

TEST(IdxReaderTest, MaxRowsReadsALeadingSlice) {
  const std::string path =
      WriteFile("rows.idx.gz", IdxBytes(0x08, {3, 2}, {1, 2, 3, 4, 5, 6}),
                /*gzip=*/true);
  IdxReadOptions opts;
  opts.dtype = DType::kInt32;
  opts.max_rows = 2;
  absl::StatusOr<Tensor> t = ReadIdx(path, opts);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->shape(), TensorShape({2, 2}));
  EXPECT_THAT(t->ToVector<int32_t>(), ElementsAre(1, 2, 3, 4));
  opts.max_rows = 10;  // More than there are: all of them.
  EXPECT_EQ(ReadIdx(path, opts)->shape(), TensorShape({3, 2}));
}

TEST(IdxReaderTest, HeaderOnly) {
  const std::string path =
      WriteFile("hdr.idx", IdxBytes(0x0C, {5, 7, 1}, std::string(140, '\0')));
  absl::StatusOr<IdxHeader> h = ReadIdxHeader(path);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->type, IdxType::kInt32);
  EXPECT_THAT(h->dims, ElementsAre(5, 7, 1));
  EXPECT_EQ(h->data_offset, 16);
}

TEST(IdxReaderTest, MissingFileIsNotFound) {
  const std::string path = TmpPath("no-such-file.idx");
  absl::StatusOr<Tensor> t = ReadIdx(path);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(t.status().message(), HasSubstr(path));
}

TEST(IdxReaderTest, BadMagicNamesFileAndOffset) {
  const std::string path = WriteFile("bad_magic.idx", "\x1f\x8c\x08\x01....");
  absl::StatusOr<Tensor> t = ReadIdx(path);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr(path));
  EXPECT_THAT(t.status().message(), HasSubstr("offset 0"));
}

TEST(IdxReaderTest, UnknownTypeCodeNamesOffset2) {
  const std::string path =
      WriteFile("bad_type.idx.gz", IdxBytes(0x0A, {1}, "x"), /*gzip=*/true);
  absl::StatusOr<Tensor> t = ReadIdx(path);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr(path));
  EXPECT_THAT(t.status().message(), HasSubstr("type code 0x0a at offset 2"));
}

TEST(IdxReaderTest, RankZeroIsMalformed) {
  const std::string path = WriteFile("rank0.idx", IdxBytes(0x08, {}, "x"));
  absl::StatusOr<Tensor> t = ReadIdx(path);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("offset 3"));
}

TEST(IdxReaderTest, TruncatedDataIsOutOfRangeWithOffset) {
  // [2,3] uint8 needs 6 data bytes at offset 12; only 4 are there.
  for (bool gzip : {false, true}) {
    const std::string path =
        WriteFile(gzip ? "short.idx.gz" : "short.idx",
                  IdxBytes(0x08, {2, 3}, {1, 2, 3, 4}), gzip);
    absl::StatusOr<Tensor> t = ReadIdx(path);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kOutOfRange) << t.status();
    EXPECT_THAT(t.status().message(), HasSubstr(path));
    EXPECT_THAT(t.status().message(), HasSubstr("offset 12"));
    EXPECT_THAT(t.status().message(), HasSubstr("ends at offset 16"));
  }
}

TEST(IdxReaderTest, TruncatedHeaderIsOutOfRange) {
  const std::string path =
      WriteFile("short_hdr.idx", std::string("\0\0\x08\x03\0\0", 6));
  absl::StatusOr<Tensor> t = ReadIdx(path);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(t.status().message(), HasSubstr("3 dimensions"));
  EXPECT_THAT(t.status().message(), HasSubstr("offset 4"));
}

TEST(IdxReaderTest, CutGzipStreamIsOutOfRange) {
  std::string payload(4000, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = char(i * 7919 % 251);
  const std::string full = WriteFile(
      "cut_src.idx.gz", IdxBytes(0x08, {4000}, payload), /*gzip=*/true);
  const std::string gz = ReadRaw(full);
  const std::string path = WriteFile("cut.idx.gz", gz.substr(0, gz.size() / 2));
  absl::StatusOr<Tensor> t = ReadIdx(path);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kOutOfRange) << t.status();
  EXPECT_THAT(t.status().message(), HasSubstr("gzip stream is cut short"));
}

TEST(IdxReaderTest, CorruptGzipIsDataLoss) {
  const std::string full = WriteFile("corrupt_src.idx.gz",
                                     IdxBytes(0x08, {64}, std::string(64, 'a')),
                                     /*gzip=*/true);
  std::string gz = ReadRaw(full);
  for (size_t i = 10; i < gz.size() - 8; ++i) gz[i] = char(0xff);
  const std::string path = WriteFile("corrupt.idx.gz", gz);
  absl::StatusOr<Tensor> t = ReadIdx(path);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss) << t.status();
  EXPECT_THAT(t.status().message(), HasSubstr(path));
}

TEST(IdxReaderTest, HugeHeaderInTinyFileFailsBeforeAllocating) {
  const std::string path =
      WriteFile("huge.idx", IdxBytes(0x08, {100000, 100000}, "xyz"));
  absl::StatusOr<Tensor> t = ReadIdx(path);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(t.status().message(), HasSubstr("10000000000 bytes"));
}

// Five dimensions of 2^32-1 wrap int64 when multiplied: the header is
// refused at the dimension that crosses the limit (before any clamping).
TEST(IdxReaderTest, OverflowingDimensionsAreRefusedWithTheirOffset) {
  const std::string path =
      WriteFile("wrap.idx", IdxBytes(0x0E,
                                     {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu,
                                      0xFFFFFFFFu, 0xFFFFFFFFu},
                                     "xyz"));
  absl::StatusOr<IdxHeader> h = ReadIdxHeader(path);
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(h.status().message(), HasSubstr(path));
  EXPECT_THAT(h.status().message(),
              HasSubstr("exceeded by dimension 1 at offset 8"));
  EXPECT_EQ(ReadIdx(path).status().code(), absl::StatusCode::kInvalidArgument);
}

// A zero dimension makes the data empty, whatever the others say.
TEST(IdxReaderTest, ZeroDimensionAfterHugeOnesIsEmpty) {
  const std::string path =
      WriteFile("zero.idx",
                IdxBytes(0x08, {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0}, ""));
  absl::StatusOr<Tensor> t = ReadIdx(path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->NumElements(), 0);
  EXPECT_EQ(t->shape().dim(3), 0);
}

TEST(IdxReaderTest, TrailingBytesAreMalformed) {
  const std::string path =
      WriteFile("trailing.idx", IdxBytes(0x08, {2}, {1, 2, 3, 4, 5}));
  absl::StatusOr<Tensor> t = ReadIdx(path);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(),
              HasSubstr("3 unexpected trailing bytes at offset 10"));
}

TEST(IdxReaderTest, UnconvertibleOptionsAreInvalid) {
  const std::string path = WriteFile(
      "f32opt.idx", IdxBytes(0x0D, {1}, std::string("\x3F\xC0\0\0", 4)));
  IdxReadOptions opts;
  opts.dtype = DType::kInt32;
  EXPECT_THAT(ReadIdx(path, opts).status().message(),
              HasSubstr("float32 IDX data cannot be read as int32"));
  const std::string u8 = WriteFile("u8opt.idx", IdxBytes(0x08, {1}, "x"));
  opts.scale = 0.5;
  EXPECT_EQ(ReadIdx(u8, opts).status().code(),
            absl::StatusCode::kInvalidArgument);
  opts = IdxReadOptions();
  opts.dtype = DType::kBool;
  EXPECT_EQ(ReadIdx(u8, opts).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ipuflow::feeds
