// longhaul.SyncEngine over lh_sync_engine (DiLoCo, Streaming DiLoCo, CO2, eager).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>

#include "comm.hpp"
#include "longhaul/longhaul.h"

namespace longhaul::py {

class SyncEngine final : public Attachment {
 public:
  // Starts the engine over `params` (a collective of the group; GIL released). `comm_obj` is the
  // Python Communicator, kept alive by the engine; the tensors are kept alive too.
  SyncEngine(nanobind::object comm_obj, nanobind::handle params,
             const lh_sync_engine_options& options, std::vector<lh_fragment_piece> pieces);
  ~SyncEngine();
  SyncEngine(const SyncEngine&) = delete;
  SyncEngine& operator=(const SyncEngine&) = delete;

  void step();
  void close();
  void save(const std::string& path);
  uint64_t hash();
  lh_sync_stats stats() const;
  std::vector<uint64_t> last_excluded() const;
  void global_params(uint32_t fragment, nanobind::handle out);
  // Frees the engine (a round in flight is abandoned); later calls raise Closed. Idempotent.
  void destroy() override;

 private:
  lh_sync_engine* handle() const;
  [[noreturn]] void fail(lh_status s) const;

  nanobind::object comm_obj_;
  Communicator* comm_ = nullptr;
  std::vector<nanobind::object> keep_;
  lh_sync_engine* engine_ = nullptr;
};

}  // namespace longhaul::py
