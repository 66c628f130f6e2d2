#include "wanlab/lab.hpp"

#include <optional>

#include <fmt/format.h>

#include "wanlab/netns.hpp"

namespace longhaul::wanlab {
namespace {

// Private to the lab's namespaces: no address of the host's own namespace is ever touched.
constexpr uint32_t kSubnet = (10u << 24) | (214u << 16);

}  // namespace

uint32_t site_ipv4(size_t index) {
  return kSubnet | static_cast<uint32_t>(index + 1);
}

size_t site_of(uint32_t ipv4, size_t site_count) {
  if ((ipv4 & 0xffffff00u) != kSubnet) return std::string::npos;
  const size_t host = ipv4 & 0xffu;
  return host >= 1 && host <= site_count ? host - 1 : std::string::npos;
}

std::string Site::address() const {
  return fmt::format("{}.{}.{}.{}", ipv4 >> 24, (ipv4 >> 16) & 0xff, (ipv4 >> 8) & 0xff,
                     ipv4 & 0xff);
}

Result<std::unique_ptr<Lab>> Lab::build(const LabSpec& spec, int pid) {
  LH_RETURN_IF_ERROR(check_lab_spec(spec));
  std::unique_ptr<Lab> lab(new Lab());
  for (const std::string& name : spec.sites) {
    Status s = lab->add_site(name, pid, spec);
    if (!s) return s.with_context(fmt::format("site {}", name));
  }
  return lab;
}

Status Lab::add_site(const std::string& name, int pid, const LabSpec& spec) {
  const std::string ns = namespace_name(pid, name);
  LH_RETURN_IF_ERROR(create_namespace(ns));
  namespaces_.push_back(ns);
  std::optional<TunDevice> tun;
  LH_RETURN_IF_ERROR(in_namespace(ns, [&]() -> Status {
    auto made = TunDevice::create(kSiteInterface, spec.offload);
    if (!made) return made.status();
    tun.emplace(std::move(made).value());
    return Status::ok();
  }));
  Site site{name, ns, site_ipv4(sites_.size()), std::move(*tun)};
  const std::vector<std::string> ip = {"ip", "-n", ns};
  const auto ip_cmd = [&](std::vector<std::string> rest) {
    std::vector<std::string> argv = ip;
    argv.insert(argv.end(), rest.begin(), rest.end());
    return run_command(argv);
  };
  LH_RETURN_IF_ERROR(ip_cmd({"link", "set", kSiteInterface, "mtu", std::to_string(spec.mtu),
                             "txqueuelen", "1000", "up"}));
  LH_RETURN_IF_ERROR(ip_cmd({"addr", "add", site.address() + "/24", "dev", kSiteInterface}));
  sites_.push_back(std::move(site));
  return Status::ok();
}

Lab::~Lab() {
  sites_.clear();  // close the TUN descriptors first
  for (const std::string& ns : namespaces_) delete_namespace(ns);
}

}  // namespace longhaul::wanlab
