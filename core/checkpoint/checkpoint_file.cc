#include "core/checkpoint/checkpoint_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/checkpoint/crc32c.h"
#include "core/status.h"

namespace ipuflow::checkpoint {
namespace {

constexpr uint64_t kHeaderBytes = 8 + 4 + 4 + 8;
constexpr uint64_t kAlign = 64;
// Tensors smaller than this are gathered in one buffer per write(2).
constexpr size_t kStageBytes = size_t{1} << 20;
// Large tensors are written in pieces of this size.
constexpr size_t kChunkBytes = size_t{8} << 20;

uint64_t AlignUp(uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

std::string Hex(uint32_t v) { return absl::StrFormat("0x%08x", v); }

absl::Status Errno(const std::string& what, const std::string& path) {
  const int e = errno;
  const std::string message =
      absl::StrCat(what, " '", path, "': ", std::strerror(e));
  if (e == ENOENT) return absl::NotFoundError(message);
  if (e == ENOSPC || e == EDQUOT) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

// Writes through a staging buffer: small tensors are gathered, large ones
// written straight from their memory.
class FileWriter {
 public:
  FileWriter(int fd, const std::string& path, const WriteOptions& options)
      : fd_(fd), path_(path), options_(options) {
    stage_.reserve(kStageBytes);
  }

  absl::Status Append(const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    if (n < kStageBytes) {
      if (stage_.size() + n > kStageBytes) RETURN_IF_ERROR(Flush());
      stage_.insert(stage_.end(), p, p + n);
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(Flush());
    while (n > 0) {
      const size_t piece = std::min(n, kChunkBytes);
      RETURN_IF_ERROR(WriteAll(p, piece));
      p += piece;
      n -= piece;
    }
    return absl::OkStatus();
  }
  absl::Status Zeros(size_t n) {
    static const char kZeros[kAlign] = {};
    return Append(kZeros, n);
  }
  absl::Status Flush() {
    if (stage_.empty()) return absl::OkStatus();
    absl::Status s = WriteAll(stage_.data(), stage_.size());
    stage_.clear();
    return s;
  }

 private:
  absl::Status WriteAll(const char* p, size_t n) {
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        return Errno("checkpoint: write", path_);
      }
      p += w;
      n -= static_cast<size_t>(w);
      written_ += w;
      if (options_.after_write) options_.after_write(written_);
    }
    return absl::OkStatus();
  }

  const int fd_;
  const std::string& path_;
  const WriteOptions& options_;
  std::vector<char> stage_;
  int64_t written_ = 0;
};

absl::Status SyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("checkpoint: open directory", dir);
  const int rc = ::fsync(fd);
  const absl::Status s =
      rc == 0 ? absl::OkStatus() : Errno("checkpoint: fsync directory", dir);
  ::close(fd);
  return s;
}

std::string DirOf(const std::string& path) {
  const std::filesystem::path p(path);
  return p.has_parent_path() ? p.parent_path().string() : ".";
}

bool ValidDType(int d) {
  switch (static_cast<DType>(d)) {
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kBool:
      return true;
    default:
      return false;
  }
}

std::string TensorWhat(const TensorEntry& e) {
  return e.replica() < 0
             ? absl::StrCat("tensor '", e.name(), "' (every replica)")
             : absl::StrCat("tensor '", e.name(), "' (replica ", e.replica(),
                            ")");
}

// The bytes of a checkpoint file being checked, and how errors name it.
struct FileBytes {
  const char* base;
  uint64_t size;
  std::string where;  // "checkpoint <what>: ", the start of every error
};

// Padding is checked like data, so that every byte of a file is checked.
bool AllZeros(const char* base, uint64_t from, uint64_t to) {
  for (uint64_t i = from; i < to; ++i) {
    if (base[i] != 0) return false;
  }
  return true;
}

// Checks the fixed header (length, magic, version) and the manifest's extent
// and CRC32C before the manifest is parsed; returns the manifest's length.
absl::StatusOr<uint64_t> CheckHeader(const FileBytes& f) {
  if (f.size < kHeaderBytes) {
    return absl::DataLossError(
        absl::StrCat(f.where, "truncated: ", f.size, " bytes, fewer than the ",
                     kHeaderBytes, " of a checkpoint header"));
  }
  if (std::memcmp(f.base, kCheckpointMagic, 8) != 0) {
    return absl::DataLossError(absl::StrCat(
        f.where,
        "not an ipuflow checkpoint (it does not start with IPUFCKPT)"));
  }
  uint32_t version, manifest_crc;
  uint64_t manifest_bytes;
  std::memcpy(&version, f.base + 8, 4);
  std::memcpy(&manifest_crc, f.base + 12, 4);
  std::memcpy(&manifest_bytes, f.base + 16, 8);
  if (version != kCheckpointFormatVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat(f.where, "format version ", version, "; this build reads ",
                     kCheckpointFormatVersion));
  }
  if (manifest_bytes > kMaxManifestBytes ||
      manifest_bytes > f.size - kHeaderBytes) {
    return absl::DataLossError(absl::StrCat(
        f.where, "truncated or corrupt: the manifest is said to have ",
        manifest_bytes, " bytes, the file has ", f.size - kHeaderBytes,
        " after the header"));
  }
  const uint32_t actual_crc = Crc32c(f.base + kHeaderBytes, manifest_bytes);
  if (actual_crc != manifest_crc) {
    return absl::DataLossError(absl::StrCat(
        f.where, "the manifest is corrupt: CRC32C ", Hex(manifest_crc),
        " stored, ", Hex(actual_crc), " computed"));
  }
  return manifest_bytes;
}

// Parses the manifest (checked by CheckHeader) into `m`.
absl::Status ParseManifestOnly(const FileBytes& f, uint64_t manifest_bytes,
                               Manifest* m) {
  if (!m->ParseFromArray(f.base + kHeaderBytes,
                         static_cast<int>(manifest_bytes))) {
    return absl::DataLossError(
        absl::StrCat(f.where, "the manifest does not parse"));
  }
  if (m->format_version() != kCheckpointFormatVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat(f.where, "manifest format version ", m->format_version(),
                     "; this build reads ", kCheckpointFormatVersion));
  }
  return absl::OkStatus();
}

// Parses the manifest into `m` and checks that the file holds the payload it
// lists after zero padding; returns the payload's offset in the file.
absl::StatusOr<uint64_t> ParseManifest(const FileBytes& f,
                                       uint64_t manifest_bytes, Manifest* m) {
  RETURN_IF_ERROR(ParseManifestOnly(f, manifest_bytes, m));
  const uint64_t payload_start = AlignUp(kHeaderBytes + manifest_bytes);
  const uint64_t payload = f.size >= payload_start ? f.size - payload_start : 0;
  if (f.size < payload_start || payload != m->payload_size()) {
    return absl::DataLossError(absl::StrCat(
        f.where, payload < m->payload_size() ? "truncated" : "corrupt",
        ": the manifest lists ", m->payload_size(),
        " payload bytes, the file holds ", payload));
  }
  if (!AllZeros(f.base, kHeaderBytes + manifest_bytes, payload_start)) {
    return absl::DataLossError(
        absl::StrCat(f.where,
                     "corrupt: the padding after the manifest is not "
                     "zeros"));
  }
  return payload_start;
}

// Checks an entry's dtype and shape against the limits and its stated size;
// `t` names the entry in errors. Returns its size in bytes.
absl::StatusOr<uint64_t> CheckedTensorBytes(const TensorEntry& e,
                                            const std::string& t) {
  if (!ValidDType(e.dtype())) {
    return absl::InvalidArgumentError(
        absl::StrCat(t, "dtype ", e.dtype(), " is not a stored dtype"));
  }
  if (e.shape_size() > kMaxTensorRank) {
    return absl::InvalidArgumentError(absl::StrCat(
        t, "rank ", e.shape_size(), " above the limit ", kMaxTensorRank));
  }
  uint64_t bytes = DTypeSize(static_cast<DType>(e.dtype()));
  for (int64_t d : e.shape()) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(t, "dimension ", d, " is negative"));
    }
    if (d != 0 && bytes > static_cast<uint64_t>(kMaxTensorBytes) / d) {
      return absl::InvalidArgumentError(
          absl::StrCat(t, "more than ", kMaxTensorBytes, " bytes"));
    }
    bytes *= static_cast<uint64_t>(d);
  }
  if (e.size() != bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        t, "size ", e.size(), " bytes, its dtype and shape make ", bytes));
  }
  return bytes;
}

// Checks a tensor's `bytes` at `data` against the entry's CRC32C, and that a
// bool tensor holds only 0 and 1.
absl::Status CheckTensorData(const TensorEntry& e, const std::string& t,
                             const char* data, uint64_t bytes) {
  const uint32_t crc = Crc32c(data, bytes);
  if (crc != e.crc32c()) {
    return absl::DataLossError(absl::StrCat(t, "corrupt: CRC32C ",
                                            Hex(e.crc32c()), " stored, ",
                                            Hex(crc), " computed"));
  }
  if (static_cast<DType>(e.dtype()) == DType::kBool) {
    for (uint64_t i = 0; i < bytes; ++i) {
      if (static_cast<unsigned char>(data[i]) > 1) {
        return absl::DataLossError(absl::StrCat(
            t, "element ", i, " is not a bool (byte ",
            static_cast<int>(static_cast<unsigned char>(data[i])), ")"));
      }
    }
  }
  return absl::OkStatus();
}

// Checks the manifest's tensor entries one by one, in payload order. It keeps
// what the entries so far claim: names, replicas and the payload they fill.
class EntryChecker {
 public:
  EntryChecker(const FileBytes& f, uint64_t payload_start,
               uint64_t payload_size)
      : f_(f), payload_start_(payload_start), payload_size_(payload_size) {}

  // Checks `e` and its bytes; returns their offset in the file.
  absl::StatusOr<uint64_t> Check(const TensorEntry& e) {
    const std::string t = absl::StrCat(f_.where, TensorWhat(e), ": ");
    RETURN_IF_ERROR(CheckName(e, t));
    ASSIGN_OR_RETURN(const uint64_t bytes, CheckedTensorBytes(e, t));
    RETURN_IF_ERROR(Place(e, t, bytes));
    const uint64_t at = payload_start_ + next_;
    RETURN_IF_ERROR(CheckTensorData(e, t, f_.base + at, bytes));
    next_ += bytes;
    return at;
  }

  // Payload bytes filled by the entries checked so far.
  uint64_t filled() const { return next_; }

 private:
  // Each (name, replica) once, and a name either for every replica (-1) or
  // for single replicas, never both.
  absl::Status CheckName(const TensorEntry& e, const std::string& t) {
    if (e.name().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(f_.where, "a tensor has no name"));
    }
    if (e.replica() < -1) {
      return absl::InvalidArgumentError(
          absl::StrCat(t, "replica ", e.replica(), " is negative"));
    }
    if (!seen_.insert({e.name(), e.replica()}).second) {
      return absl::InvalidArgumentError(absl::StrCat(t, "listed twice"));
    }
    auto [it, fresh] = every_replica_.insert({e.name(), e.replica() < 0});
    if (!fresh && it->second != (e.replica() < 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(t, "listed both for every replica and for one replica"));
    }
    return absl::OkStatus();
  }

  // Tensors follow each other at aligned offsets with zero padding between;
  // moves `next_` to the entry's aligned offset once it is checked.
  absl::Status Place(const TensorEntry& e, const std::string& t,
                     uint64_t bytes) {
    if (AlignUp(next_) <= payload_size_ &&
        !AllZeros(f_.base, payload_start_ + next_,
                  payload_start_ + AlignUp(next_))) {
      return absl::DataLossError(
          absl::StrCat(t, "corrupt: the padding before it is not zeros"));
    }
    next_ = AlignUp(next_);
    if (e.offset() != next_) {
      return absl::InvalidArgumentError(absl::StrCat(
          t, "at payload offset ", e.offset(), ", expected ", next_));
    }
    if (bytes > payload_size_ || next_ > payload_size_ - bytes) {
      return absl::DataLossError(absl::StrCat(
          t, "bytes [", next_, ", ", next_ + bytes, ") lie past the payload's ",
          payload_size_, ": truncated"));
    }
    return absl::OkStatus();
  }

  const FileBytes& f_;
  const uint64_t payload_start_;
  const uint64_t payload_size_;
  std::set<std::pair<std::string, int>> seen_;
  std::map<std::string, bool> every_replica_;  // name -> replica == -1
  uint64_t next_ = 0;  // payload offset after the last tensor checked
};

// Checks the file held in `buffer` (`size` bytes) and returns tensors that
// view it.
absl::StatusOr<CheckpointContents> ParseBuffer(
    std::shared_ptr<TensorBuffer> buffer, uint64_t size,
    const std::string& what) {
  const FileBytes f{static_cast<const char*>(buffer->data()), size,
                    absl::StrCat("checkpoint ", what, ": ")};
  ASSIGN_OR_RETURN(const uint64_t manifest_bytes, CheckHeader(f));
  CheckpointContents out;
  ASSIGN_OR_RETURN(const uint64_t payload_start,
                   ParseManifest(f, manifest_bytes, &out.manifest));
  const Manifest& m = out.manifest;
  EntryChecker entries(f, payload_start, m.payload_size());
  out.tensors.reserve(m.tensors_size());
  for (const TensorEntry& e : m.tensors()) {
    ASSIGN_OR_RETURN(const uint64_t at, entries.Check(e));
    TensorShape shape;
    for (int64_t d : e.shape()) shape.AddDim(d);
    out.tensors.emplace_back(static_cast<DType>(e.dtype()), shape, buffer, at);
  }
  if (entries.filled() != m.payload_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(f.where, "the tensors fill ", entries.filled(),
                     " payload bytes, the manifest says ", m.payload_size()));
  }
  return out;
}

}  // namespace

absl::Status WriteCheckpointFile(const std::string& path,
                                 CheckpointContents* contents,
                                 const WriteOptions& options) {
  Manifest& m = contents->manifest;
  if (m.tensors_size() != static_cast<int>(contents->tensors.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint '", path, "': ", m.tensors_size(), " tensor entries but ",
        contents->tensors.size(), " tensors"));
  }
  m.set_format_version(kCheckpointFormatVersion);
  uint64_t offset = 0;
  for (int i = 0; i < m.tensors_size(); ++i) {
    const Tensor& t = contents->tensors[i];
    TensorEntry& e = *m.mutable_tensors(i);
    if (!ValidDType(static_cast<int>(t.dtype()))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint '", path, "': ", TensorWhat(e), " has dtype ",
          DTypeName(t.dtype()), ", which is not stored"));
    }
    e.set_dtype(static_cast<int>(t.dtype()));
    e.clear_shape();
    for (int64_t d : t.shape().dims()) e.add_shape(d);
    offset = AlignUp(offset);
    e.set_offset(offset);
    e.set_size(t.TotalBytes());
    e.set_crc32c(Crc32c(t.raw_data(), t.TotalBytes()));
    offset += t.TotalBytes();
  }
  m.set_payload_size(offset);
  std::string manifest;
  if (!m.SerializeToString(&manifest)) {
    return absl::InternalError(absl::StrCat(
        "checkpoint '", path, "': the manifest does not serialise"));
  }
  if (manifest.size() > kMaxManifestBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint '", path, "': a manifest of ", manifest.size(),
                     " bytes is above the limit ", kMaxManifestBytes));
  }
  std::string header(kHeaderBytes, '\0');
  const uint32_t version = kCheckpointFormatVersion;
  const uint32_t crc = Crc32c(manifest.data(), manifest.size());
  const uint64_t manifest_bytes = manifest.size();
  std::memcpy(header.data(), kCheckpointMagic, 8);
  std::memcpy(header.data() + 8, &version, 4);
  std::memcpy(header.data() + 12, &crc, 4);
  std::memcpy(header.data() + 16, &manifest_bytes, 8);

  const std::string tmp = absl::StrCat(path, ".tmp-", ::getpid());
  const int fd =
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("checkpoint: create", tmp);
  absl::Status s = [&]() -> absl::Status {
    FileWriter w(fd, tmp, options);
    RETURN_IF_ERROR(w.Append(header.data(), header.size()));
    RETURN_IF_ERROR(w.Append(manifest.data(), manifest.size()));
    uint64_t at = kHeaderBytes + manifest.size();
    RETURN_IF_ERROR(w.Zeros(AlignUp(at) - at));
    uint64_t written = 0;
    for (size_t i = 0; i < contents->tensors.size(); ++i) {
      const Tensor& t = contents->tensors[i];
      RETURN_IF_ERROR(w.Zeros(AlignUp(written) - written));
      written = AlignUp(written);
      RETURN_IF_ERROR(w.Append(t.raw_data(), t.TotalBytes()));
      written += t.TotalBytes();
    }
    RETURN_IF_ERROR(w.Flush());
    if (::fsync(fd) != 0) return Errno("checkpoint: fsync", tmp);
    return absl::OkStatus();
  }();
  if (::close(fd) != 0 && s.ok()) s = Errno("checkpoint: close", tmp);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    s = Errno(absl::StrCat("checkpoint: rename '", tmp, "' to"), path);
  }
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  return SyncDirectory(DirOf(path));
}

absl::StatusOr<CheckpointContents> ReadCheckpointFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("checkpoint: open", path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    absl::Status s = Errno("checkpoint: stat", path);
    ::close(fd);
    return s;
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  std::shared_ptr<TensorBuffer> buffer =
      TensorBuffer::TryAllocate(std::max<uint64_t>(size, 1));
  if (buffer == nullptr) {
    ::close(fd);
    return absl::ResourceExhaustedError(
        absl::StrCat("checkpoint '", path, "': cannot allocate ", size,
                     " bytes to read it"));
  }
  char* p = static_cast<char*>(buffer->data());
  uint64_t got = 0;
  while (got < size) {
    const ssize_t r = ::read(fd, p + got, size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      absl::Status s = Errno("checkpoint: read", path);
      ::close(fd);
      return s;
    }
    if (r == 0) break;  // Shrunk since fstat: checked as truncated.
    got += static_cast<uint64_t>(r);
  }
  ::close(fd);
  return ParseBuffer(std::move(buffer), got, absl::StrCat("'", path, "'"));
}

absl::StatusOr<Manifest> ReadCheckpointManifest(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("checkpoint: open", path);
  // Reads up to `n` bytes at `offset` into `out`; returns how many.
  auto read_at = [fd](uint64_t offset, uint64_t n, char* out) -> int64_t {
    uint64_t got = 0;
    while (got < n) {
      const ssize_t r = ::pread(fd, out + got, n - got, offset + got);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return -1;
      if (r == 0) break;
      got += static_cast<uint64_t>(r);
    }
    return static_cast<int64_t>(got);
  };
  struct stat st;
  absl::StatusOr<Manifest> out = [&]() -> absl::StatusOr<Manifest> {
    if (::fstat(fd, &st) != 0) return Errno("checkpoint: stat", path);
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    std::string bytes(std::min(size, kHeaderBytes), '\0');
    int64_t got = read_at(0, bytes.size(), bytes.data());
    if (got < 0) return Errno("checkpoint: read", path);
    FileBytes f{bytes.data(), static_cast<uint64_t>(got),
                absl::StrCat("checkpoint '", path, "': ")};
    if (f.size == kHeaderBytes) {
      // The manifest, when the header's size of it is within the file;
      // otherwise CheckHeader refuses it before it reads past the header.
      f.size = size;
      uint64_t manifest_bytes;
      std::memcpy(&manifest_bytes, bytes.data() + 16, 8);
      if (manifest_bytes <= kMaxManifestBytes &&
          manifest_bytes <= size - kHeaderBytes) {
        bytes.resize(kHeaderBytes + manifest_bytes);
        got =
            read_at(kHeaderBytes, manifest_bytes, bytes.data() + kHeaderBytes);
        if (got < 0) return Errno("checkpoint: read", path);
        f.base = bytes.data();
        if (static_cast<uint64_t>(got) < manifest_bytes) {
          f.size = kHeaderBytes + got;  // Shrunk since fstat: refused.
        }
      }
    }
    ASSIGN_OR_RETURN(const uint64_t manifest_bytes, CheckHeader(f));
    Manifest m;
    RETURN_IF_ERROR(ParseManifestOnly(f, manifest_bytes, &m));
    return m;
  }();
  ::close(fd);
  return out;
}

absl::StatusOr<CheckpointContents> ParseCheckpoint(absl::string_view bytes,
                                                   absl::string_view what) {
  std::shared_ptr<TensorBuffer> buffer =
      TensorBuffer::TryAllocate(std::max<size_t>(bytes.size(), 1));
  if (buffer == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "checkpoint ", what, ": cannot allocate ", bytes.size(), " bytes"));
  }
  if (!bytes.empty()) std::memcpy(buffer->data(), bytes.data(), bytes.size());
  return ParseBuffer(std::move(buffer), bytes.size(), std::string(what));
}

}  // namespace ipuflow::checkpoint
