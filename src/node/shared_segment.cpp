#include "node/shared_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace longhaul::node {

namespace {

constexpr size_t kMaxNameBytes = 250;

Status system_error(const std::string& what, const std::string& name) {
  return io_error(fmt::format("{} of shared memory '{}': {}", what, name, std::strerror(errno)));
}

// Maps fd (which the caller closes) read-write, `bytes` long.
Result<std::byte*> map(int fd, size_t bytes, const std::string& name) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return system_error("mmap", name);
  return static_cast<std::byte*>(p);
}

}  // namespace

Status check_segment_name(const std::string& name) {
  const bool chars_ok = name.size() > 1 && name.front() == '/' &&
                        std::all_of(name.begin() + 1, name.end(), [](char c) {
                          return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                 (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
                        });
  if (!chars_ok || name.size() > kMaxNameBytes + 1)
    return invalid_argument(
        fmt::format("shared memory name '{}' must be '/' and 1 to {} bytes of [A-Za-z0-9._-]", name,
                    kMaxNameBytes));
  return Status::ok();
}

Result<SharedSegment> SharedSegment::create(const std::string& name, size_t bytes) {
  if (Status s = check_segment_name(name); !s) return s;
  if (bytes == 0) return invalid_argument("a shared memory segment needs at least one byte");
  shm_unlink(name.c_str());  // a stale segment of a group that never formed
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return system_error("shm_open (create)", name);
  // Reserve the pages now: on a full tmpfs a mapping of a merely truncated file dies with
  // SIGBUS at the first write past the space left.
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 ||
      (errno = posix_fallocate(fd, 0, static_cast<off_t>(bytes))) != 0) {
    Status s = system_error("reserving " + std::to_string(bytes) + " bytes", name);
    close(fd);
    shm_unlink(name.c_str());
    return s;
  }
  auto data = map(fd, bytes, name);
  close(fd);
  if (!data) {
    shm_unlink(name.c_str());
    return data.status();
  }
  return SharedSegment(name, *data, bytes);
}

Result<std::optional<SharedSegment>> SharedSegment::open(const std::string& name) {
  if (Status s = check_segment_name(name); !s) return s;
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<SharedSegment>();
    return system_error("shm_open", name);
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    Status s = system_error("fstat", name);
    close(fd);
    return s;
  }
  if (st.st_size == 0) {  // created but not sized yet: not there for us
    close(fd);
    return std::optional<SharedSegment>();
  }
  auto data = map(fd, static_cast<size_t>(st.st_size), name);
  close(fd);
  if (!data) return data.status();
  return std::optional<SharedSegment>(SharedSegment(name, *data, static_cast<size_t>(st.st_size)));
}

SharedSegment::SharedSegment(SharedSegment&& other) noexcept
    : name_(std::move(other.name_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

SharedSegment& SharedSegment::operator=(SharedSegment&& other) noexcept {
  if (this != &other) {
    release();
    name_ = std::move(other.name_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

SharedSegment::~SharedSegment() {
  release();
}

void SharedSegment::release() {
  if (data_) munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

Status SharedSegment::unlink() const {
  if (shm_unlink(name_.c_str()) != 0 && errno != ENOENT) return system_error("shm_unlink", name_);
  return Status::ok();
}

}  // namespace longhaul::node
