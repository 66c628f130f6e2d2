// longhaul.LocalGroup over lh_local_group: a node's ranks reducing among themselves through
// shared memory, and the hierarchical all-reduce over them.
#pragma once

#include <optional>
#include <shared_mutex>
#include <string>

#include <nanobind/nanobind.h>

#include "comm.hpp"
#include "longhaul/longhaul.h"

namespace longhaul::py {

class LocalGroup final : public Attachment {
 public:
  // Forms the group of `comm_obj`'s node (GIL released while it waits for the siblings). The
  // Python Communicator is kept alive by the group.
  LocalGroup(nanobind::object comm_obj, const lh_local_group_options& options);
  ~LocalGroup();
  LocalGroup(const LocalGroup&) = delete;
  LocalGroup& operator=(const LocalGroup&) = delete;

  // lh_node_allreduce in place (GIL released); returns the tensor.
  nanobind::object allreduce(nanobind::handle tensor, const std::string& op, nanobind::handle quant,
                             std::optional<uint32_t> block, uint32_t max_attempts);
  void abort(const std::string& reason);
  void destroy() override;

 private:
  nanobind::object comm_obj_;
  Communicator* comm_ = nullptr;
  // Calls on the group (allreduce, abort) hold it shared, without the GIL; destroy() holds it
  // exclusively, so destroy() from another thread, or Communicator.close(), waits for a call in
  // progress instead of freeing the group under it, while abort() can still interrupt one.
  std::shared_mutex mu_;
  lh_local_group* group_ = nullptr;  // guarded by mu_
};

}  // namespace longhaul::py
