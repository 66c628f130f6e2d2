// A POSIX shared-memory segment mapped into this process: the memory the ranks of one node share
// for their local steps (shm_local_group.hpp).
//
// Names follow shm_open: one leading '/', then at most 250 bytes of [A-Za-z0-9._-]. A segment is
// created by one process and opened by the others; its creator unlinks the name once every rank
// has it mapped, so nothing is left in /dev/shm after the node's processes end, even killed.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "common/status.hpp"

namespace longhaul::node {

class SharedSegment {
 public:
  // Creates `name` with `bytes` zero bytes and maps it. A segment already under the name (left by
  // a process that died before its group formed) is unlinked first: whoever still maps it keeps
  // the old memory, a later open finds the new one. LH_ERR_INVALID_ARGUMENT for a bad name,
  // LH_ERR_IO with errno's text when the system refuses (/dev/shm full, limits).
  static Result<SharedSegment> create(const std::string& name, size_t bytes);
  // Maps an existing segment, or nullopt when none has the name yet. LH_ERR_IO as create.
  static Result<std::optional<SharedSegment>> open(const std::string& name);

  SharedSegment(SharedSegment&& other) noexcept;
  SharedSegment& operator=(SharedSegment&& other) noexcept;
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;
  // Unmaps (the memory lives on while another process maps it).
  ~SharedSegment();

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  // Removes the name; the mappings stay valid. Removing a name already gone is not an error.
  Status unlink() const;

 private:
  SharedSegment(std::string name, std::byte* data, size_t size)
      : name_(std::move(name)), data_(data), size_(size) {}
  void release();
  std::string name_;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

// OK when `name` is a segment name this library accepts (above).
Status check_segment_name(const std::string& name);

}  // namespace longhaul::node
