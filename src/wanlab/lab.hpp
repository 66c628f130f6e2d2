// The sites of a packet lab: one network namespace per site, each with one TUN interface `wan0`
// whose other end (the file descriptor) stays with the lab process, which forwards between them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "wanlab/lab_spec.hpp"
#include "wanlab/tun_device.hpp"

namespace longhaul::wanlab {

inline constexpr const char* kSiteInterface = "wan0";

struct Site {
  std::string name;
  std::string netns;
  uint32_t ipv4 = 0;  // host byte order; the lab's /24 is 10.214.0.0/24, site i has .i+1
  TunDevice tun;
  std::string address() const;
};

// Site i's address, and the site an address belongs to (npos if none).
uint32_t site_ipv4(size_t index);
size_t site_of(uint32_t ipv4, size_t site_count);

class Lab {
 public:
  // Makes every site (namespace, TUN device, address, MTU, route); on failure removes what it
  // made. `pid` names the namespaces (the calling process's id).
  static Result<std::unique_ptr<Lab>> build(const LabSpec& spec, int pid);
  ~Lab();  // deletes the namespaces
  Lab(const Lab&) = delete;
  Lab& operator=(const Lab&) = delete;

  std::vector<Site>& sites() { return sites_; }

 private:
  Lab() = default;
  Status add_site(const std::string& name, int pid, const LabSpec& spec);
  std::vector<Site> sites_;
  std::vector<std::string> namespaces_;  // made so far, deleted on destruction
};

}  // namespace longhaul::wanlab
