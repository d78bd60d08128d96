#include "feeds/idx_reader.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/half.h"

namespace ipuflow::feeds {
namespace {

// Deflate cannot compress better than 1032:1, so a gzip file of n bytes
// decompresses to at most about 1032 * n bytes. This bounds what a header may
// announce before any memory is allocated for it.
constexpr int64_t kMaxDeflateRatio = 1032;
// Larger than any sane IDX file; keeps the size arithmetic far from overflow.
constexpr int64_t kMaxDataBytes = int64_t{1} << 40;
constexpr int64_t kChunkBytes = int64_t{1} << 20;

// A file read through zlib (which reads plain files as they are), tracking
// the offset in the decompressed stream for error messages.
// Thread-compatible: one thread at a time.
class ByteReader {
 public:
  static absl::StatusOr<std::unique_ptr<ByteReader>> Open(
      const std::string& path);
  ~ByteReader() { gzclose(file_); }
  ByteReader(const ByteReader&) = delete;
  ByteReader& operator=(const ByteReader&) = delete;

  // Reads exactly `n` bytes of `what` into `dst`, or fails with OutOfRange
  // (the data ends first) or DataLoss (corrupt gzip data).
  absl::Status Read(void* dst, int64_t n, absl::string_view what);
  // InvalidArgument naming the trailing bytes unless the data ends here.
  absl::Status ExpectEnd(absl::string_view after);
  // An upper bound of the decompressed size.
  int64_t MaxSize() const {
    return compressed_ ? file_size_ * kMaxDeflateRatio : file_size_;
  }
  bool compressed() const { return compressed_; }
  int64_t file_size() const { return file_size_; }
  int64_t offset() const { return offset_; }
  const std::string& path() const { return path_; }

 private:
  ByteReader(std::string path, gzFile file, int64_t file_size)
      : path_(std::move(path)), file_(file), file_size_(file_size) {
    // Must precede gzdirect (which reads). No larger than the file: zlib
    // allocates three times this, per open.
    gzbuffer(file_, static_cast<unsigned>(
                        std::clamp<int64_t>(file_size, 8192, 1 << 17)));
    compressed_ = gzdirect(file_) == 0;
  }
  // Reads up to n bytes; returns the count, or an error other than a clean
  // or abrupt end of data (those show as a short count).
  absl::StatusOr<int64_t> ReadSome(void* dst, int64_t n);

  std::string path_;
  gzFile file_;
  int64_t file_size_;
  bool compressed_ = false;
  bool stream_cut_ = false;  // The gzip stream ended abruptly.
  int64_t offset_ = 0;
};

absl::StatusOr<std::unique_ptr<ByteReader>> ByteReader::Open(
    const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      return absl::NotFoundError(absl::StrCat("IDX file not found: ", path));
    }
    return absl::PermissionDeniedError(
        absl::StrCat("cannot stat IDX file ", path, ": ", std::strerror(err)));
  }
  if (S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is a directory, not an IDX file"));
  }
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    return absl::PermissionDeniedError(absl::StrCat(
        "cannot open IDX file ", path, ": ", std::strerror(errno)));
  }
  return std::unique_ptr<ByteReader>(
      new ByteReader(path, file, static_cast<int64_t>(st.st_size)));
}

absl::StatusOr<int64_t> ByteReader::ReadSome(void* dst, int64_t n) {
  char* p = static_cast<char*>(dst);
  int64_t done = 0;
  while (done < n && !stream_cut_) {
    const unsigned chunk =
        static_cast<unsigned>(std::min<int64_t>(n - done, int64_t{1} << 30));
    const int got = gzread(file_, p + done, chunk);
    if (got > 0) {
      done += got;
      continue;
    }
    int err = Z_OK;
    const char* msg = gzerror(file_, &err);
    if (err == Z_BUF_ERROR) {
      stream_cut_ = true;  // "unexpected end of file": a truncated .gz.
    } else if (got < 0 || (err != Z_OK && err != Z_STREAM_END)) {
      return absl::DataLossError(
          absl::StrCat(path_, ": corrupt gzip data at decompressed offset ",
                       offset_ + done, ": ", msg));
    }
    break;
  }
  offset_ += done;
  return done;
}

absl::Status ByteReader::Read(void* dst, int64_t n, absl::string_view what) {
  const int64_t start = offset_;
  ASSIGN_OR_RETURN(int64_t got, ReadSome(dst, n));
  if (got == n) return absl::OkStatus();
  return absl::OutOfRangeError(absl::StrCat(
      path_, ": truncated: ", what, " needs ", n, " bytes at offset ", start,
      " but the ", compressed_ ? "decompressed data" : "file",
      " ends at offset ", offset_,
      stream_cut_ ? " (the gzip stream is cut short)" : ""));
}

absl::Status ByteReader::ExpectEnd(absl::string_view after) {
  const int64_t end = offset_;
  // Small: most files have no trailing bytes, and this runs for every file.
  constexpr int64_t kScratchBytes = 1 << 14;
  char scratch[kScratchBytes];
  int64_t trailing = 0;
  while (true) {
    ASSIGN_OR_RETURN(int64_t got, ReadSome(scratch, kScratchBytes));
    trailing += got;
    if (got < kScratchBytes) break;
  }
  if (trailing == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      path_, ": ", trailing, " unexpected trailing bytes at offset ", end,
      " after ", after));
}

const char* IdxTypeName(IdxType type) {
  switch (type) {
    case IdxType::kUint8:
      return "uint8";
    case IdxType::kInt8:
      return "int8";
    case IdxType::kInt16:
      return "int16";
    case IdxType::kInt32:
      return "int32";
    case IdxType::kFloat32:
      return "float32";
    case IdxType::kFloat64:
      return "float64";
  }
  return "?";
}

bool IsKnownType(uint8_t code) {
  return code == 0x08 || code == 0x09 || code == 0x0B || code == 0x0C ||
         code == 0x0D || code == 0x0E;
}

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) |
         (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

uint64_t BigEndian64(const uint8_t* p) {
  return (uint64_t{BigEndian32(p)} << 32) | BigEndian32(p + 4);
}

std::string DimsString(const std::vector<int64_t>& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

absl::StatusOr<IdxHeader> ParseHeader(ByteReader& in) {
  const std::string& path = in.path();
  uint8_t magic[4];
  RETURN_IF_ERROR(in.Read(magic, 4, "the magic number"));
  if (magic[0] != 0 || magic[1] != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: not an IDX file: magic 0x%02x%02x%02x%02x at offset 0 must "
        "start with two zero bytes",
        path, magic[0], magic[1], magic[2], magic[3]));
  }
  if (!IsKnownType(magic[2])) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: unknown IDX type code 0x%02x at offset 2; expected 0x08 (uint8), "
        "0x09 (int8), 0x0B (int16), 0x0C (int32), 0x0D (float32) or 0x0E "
        "(float64)",
        path, magic[2]));
  }
  const int rank = magic[3];
  if (rank == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        ": IDX rank 0 at offset 3; an IDX file has at least 1 dimension"));
  }
  IdxHeader header;
  header.type = static_cast<IdxType>(magic[2]);
  std::vector<uint8_t> raw(4 * rank);
  RETURN_IF_ERROR(in.Read(raw.data(), raw.size(),
                          absl::StrCat("the ", rank, " dimensions")));
  for (int i = 0; i < rank; ++i) {
    header.dims.push_back(BigEndian32(&raw[4 * i]));
  }
  header.data_offset = 4 + 4 * rank;
  // Checked before multiplying on: a zero dimension anywhere makes the data
  // empty, so the bound applies to the product of the non-zero dimensions.
  if (std::find(header.dims.begin(), header.dims.end(), 0) !=
      header.dims.end()) {
    return header;
  }
  int64_t bytes = IdxTypeSize(header.type);
  for (int i = 0; i < rank; ++i) {
    if (!CheckedMul(bytes, header.dims[i], &bytes) || bytes > kMaxDataBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": IDX dimensions ", DimsString(header.dims), " at offset 4 ",
          "describe more than ", kMaxDataBytes, " bytes of ",
          IdxTypeName(header.type), " data (the limit is exceeded by ",
          "dimension ", i, " at offset ", 4 + 4 * i, ")"));
    }
  }
  return header;
}

// Stores `v` (a decoded IDX value) as Dst.
template <typename Dst, typename V>
Dst Store(V v, double scale) {
  if constexpr (std::is_same_v<Dst, float> || std::is_same_v<Dst, half>) {
    return static_cast<Dst>(static_cast<float>(static_cast<double>(v) * scale));
  } else {
    return static_cast<Dst>(v);
  }
}

template <typename Dst>
void Convert(IdxType type, const uint8_t* src, int64_t n, double scale,
             Dst* dst) {
  switch (type) {
    case IdxType::kUint8:
      for (int64_t i = 0; i < n; ++i) dst[i] = Store<Dst>(src[i], scale);
      break;
    case IdxType::kInt8:
      for (int64_t i = 0; i < n; ++i) {
        dst[i] = Store<Dst>(static_cast<int8_t>(src[i]), scale);
      }
      break;
    case IdxType::kInt16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t u = (uint16_t{src[2 * i]} << 8) | src[2 * i + 1];
        dst[i] = Store<Dst>(static_cast<int16_t>(u), scale);
      }
      break;
    case IdxType::kInt32:
      for (int64_t i = 0; i < n; ++i) {
        dst[i] =
            Store<Dst>(static_cast<int32_t>(BigEndian32(src + 4 * i)), scale);
      }
      break;
    case IdxType::kFloat32:
      for (int64_t i = 0; i < n; ++i) {
        const uint32_t bits = BigEndian32(src + 4 * i);
        float f;
        std::memcpy(&f, &bits, 4);
        dst[i] = Store<Dst>(f, scale);
      }
      break;
    case IdxType::kFloat64:
      for (int64_t i = 0; i < n; ++i) {
        const uint64_t bits = BigEndian64(src + 8 * i);
        double d;
        std::memcpy(&d, &bits, 8);
        dst[i] = Store<Dst>(d, scale);
      }
      break;
  }
}

absl::Status CheckOptions(const std::string& path, const IdxHeader& header,
                          const IdxReadOptions& options) {
  const DType dt = options.dtype;
  if (!IsFloating(dt) && !IsInteger(dt)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReadIdx(", path, "): dtype ", DTypeName(dt),
        " is not supported; use float32, float16, int32 or int64"));
  }
  const bool float_data =
      header.type == IdxType::kFloat32 || header.type == IdxType::kFloat64;
  if (IsInteger(dt) && float_data) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReadIdx(", path, "): ", IdxTypeName(header.type),
        " IDX data cannot be read as ", DTypeName(dt), "; read it as float32"));
  }
  if (IsInteger(dt) && options.scale != 1.0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReadIdx(", path, "): scale ", options.scale,
                     " needs a floating dtype, not ", DTypeName(dt)));
  }
  if (options.max_rows < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReadIdx(", path, "): max_rows must be >= -1 (all), got ",
                     options.max_rows));
  }
  return absl::OkStatus();
}

// OutOfRange if the file cannot hold `n` elements after the header, checked
// before a tensor of that size is allocated.
absl::Status CheckFits(const ByteReader& in, const IdxHeader& header,
                       int64_t n) {
  const int64_t bytes = n * IdxTypeSize(header.type);
  if (header.data_offset + bytes <= in.MaxSize()) return absl::OkStatus();
  const std::string where =
      in.compressed()
          ? absl::StrCat("a ", in.file_size(),
                         "-byte gzip file decompresses to at most ",
                         in.MaxSize(), " bytes")
          : absl::StrCat("the file ends at offset ", in.file_size());
  return absl::OutOfRangeError(
      absl::StrCat(in.path(), ": truncated: the data needs ", bytes,
                   " bytes at offset ", header.data_offset, " but ", where));
}

// Reads `out.NumElements()` elements of the header's type into `out`.
absl::Status ReadData(ByteReader& in, const IdxHeader& header, double scale,
                      const Tensor& out) {
  const int size = IdxTypeSize(header.type);
  const int64_t n = out.NumElements();
  const int64_t chunk = std::max<int64_t>(1, kChunkBytes / size);
  std::vector<uint8_t> buf(std::min(n, chunk) * size);
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t k = std::min(chunk, n - begin);
    RETURN_IF_ERROR(in.Read(buf.data(), k * size,
                            absl::StrCat("the data (element ", begin, ")")));
    IPUFLOW_SWITCH_NUMERIC(
        out.dtype(),
        Convert<T>(header.type, buf.data(), k, scale, out.data<T>() + begin),
        IPU_CHECK(false));
  }
  return absl::OkStatus();
}

}  // namespace

int IdxTypeSize(IdxType type) {
  switch (type) {
    case IdxType::kUint8:
    case IdxType::kInt8:
      return 1;
    case IdxType::kInt16:
      return 2;
    case IdxType::kInt32:
    case IdxType::kFloat32:
      return 4;
    case IdxType::kFloat64:
      return 8;
  }
  return 1;
}

absl::StatusOr<IdxHeader> ReadIdxHeader(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<ByteReader> in, ByteReader::Open(path));
  return ParseHeader(*in);
}

absl::StatusOr<Tensor> ReadIdx(const std::string& path,
                               const IdxReadOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<ByteReader> in, ByteReader::Open(path));
  ASSIGN_OR_RETURN(IdxHeader header, ParseHeader(*in));
  RETURN_IF_ERROR(CheckOptions(path, header, options));
  std::vector<int64_t> dims = header.dims;
  const bool whole = options.max_rows < 0 || options.max_rows >= dims[0];
  if (!whole) dims[0] = options.max_rows;
  const TensorShape shape(absl::MakeConstSpan(dims));
  RETURN_IF_ERROR(CheckFits(*in, header, shape.num_elements()));
  absl::StatusOr<Tensor> allocated = Tensor::Allocate(options.dtype, shape);
  if (!allocated.ok()) {
    return absl::Status(allocated.status().code(),
                        absl::StrCat(path, ": ", allocated.status().message()));
  }
  Tensor out = *std::move(allocated);
  RETURN_IF_ERROR(ReadData(*in, header, options.scale, out));
  if (whole) {
    RETURN_IF_ERROR(in->ExpectEnd(absl::StrCat("the ", IdxTypeName(header.type),
                                               " data of shape ",
                                               DimsString(header.dims))));
  }
  return out;
}

}  // namespace ipuflow::feeds
