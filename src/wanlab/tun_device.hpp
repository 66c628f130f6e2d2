// A TUN device (layer 3, no packet-info header) with a virtio_net_hdr on every frame, so that with
// offloads on the kernel hands over and accepts TCP super-packets of up to 64 KiB (GSO) instead
// of one read or write per MTU packet.
#pragma once

#include <string>

#include "common/status.hpp"

namespace longhaul::wanlab {

class TunDevice {
 public:
  // Creates interface `ifname` in the calling thread's network namespace, non-blocking.
  static Result<TunDevice> create(const std::string& ifname, bool offload);
  TunDevice(TunDevice&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  TunDevice& operator=(TunDevice&& other) noexcept;
  TunDevice(const TunDevice&) = delete;
  TunDevice& operator=(const TunDevice&) = delete;
  ~TunDevice();

  int fd() const { return fd_; }

 private:
  explicit TunDevice(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace longhaul::wanlab
