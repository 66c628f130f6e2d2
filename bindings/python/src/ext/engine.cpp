#include "engine.hpp"

#include "comm.hpp"
#include "errors.hpp"
#include "tensors.hpp"

namespace nb = nanobind;

namespace longhaul::py {

SyncEngine::SyncEngine(nb::object comm_obj, nb::handle params,
                       const lh_sync_engine_options& options, std::vector<lh_fragment_piece> pieces)
    : comm_obj_(std::move(comm_obj)), comm_(nb::cast<Communicator*>(comm_obj_)) {
  std::vector<lh_param_range> ranges;
  size_t i = 0;
  for (nb::handle p : params) {
    TensorView v = import_tensor(p, /*writable=*/true, "params[" + std::to_string(i++) + "]");
    ranges.push_back({v.data, v.count, v.dtype});
    keep_.push_back(std::move(v.keep));
  }
  lh_sync_engine_options o = options;
  o.ranges = ranges.data();
  o.range_count = ranges.size();
  o.pieces = pieces.empty() ? nullptr : pieces.data();
  o.piece_count = pieces.size();
  lh_comm* c = comm_->handle();
  lh_status s;
  {
    nb::gil_scoped_release unlocked;
    s = lh_sync_engine_start(c, &o, &engine_);
  }
  if (s != LH_OK) raise_status(s, lh_comm_last_error(c));
  comm_->attach(this);
}

SyncEngine::~SyncEngine() {
  destroy();
}

void SyncEngine::destroy() {
  if (!engine_) return;
  lh_sync_engine* e = engine_;
  engine_ = nullptr;
  comm_->detach(this);
  {
    nb::gil_scoped_release unlocked;
    lh_sync_engine_destroy(e);
  }
  keep_.clear();
}

lh_sync_engine* SyncEngine::handle() const {
  if (!engine_)
    raise_status(LH_ERR_CLOSED, "the sync engine was destroyed (or its communicator closed)");
  return engine_;
}

void SyncEngine::fail(lh_status s) const {
  raise_status(s, lh_sync_engine_last_error(engine_));
}

void SyncEngine::step() {
  lh_sync_engine* e = handle();
  lh_status s;
  {
    nb::gil_scoped_release unlocked;
    s = lh_sync_engine_step(e);
  }
  if (s != LH_OK) fail(s);
}

void SyncEngine::close() {
  lh_sync_engine* e = handle();
  lh_status s;
  {
    nb::gil_scoped_release unlocked;
    s = lh_sync_engine_close(e);
  }
  if (s != LH_OK) fail(s);
}

void SyncEngine::save(const std::string& path) {
  lh_sync_engine* e = handle();
  lh_status s;
  {
    nb::gil_scoped_release unlocked;
    s = lh_sync_engine_save(e, path.c_str());
  }
  if (s != LH_OK) fail(s);
}

uint64_t SyncEngine::hash() {
  lh_sync_engine* e = handle();
  uint64_t h = 0;
  lh_status s;
  {
    nb::gil_scoped_release unlocked;
    s = lh_sync_engine_hash(e, &h);
  }
  if (s != LH_OK) fail(s);
  return h;
}

lh_sync_stats SyncEngine::stats() const {
  lh_sync_stats st{};
  const lh_status s = lh_sync_engine_get_stats(handle(), &st);
  if (s != LH_OK) fail(s);
  return st;
}

std::vector<uint64_t> SyncEngine::last_excluded() const {
  size_t n = 0;
  lh_status s = lh_sync_engine_last_excluded(handle(), nullptr, 0, &n);
  std::vector<uint64_t> ids(n);
  if (s == LH_OK && n) s = lh_sync_engine_last_excluded(handle(), ids.data(), ids.size(), &n);
  if (s != LH_OK) fail(s);
  ids.resize(std::min(n, ids.size()));
  return ids;
}

void SyncEngine::global_params(uint32_t fragment, nb::handle out) {
  TensorView v = import_tensor(out, /*writable=*/true, "out");
  if (v.dtype != LH_DTYPE_F32) throw nb::type_error("out: the global parameters are float32");
  lh_sync_engine* e = handle();
  lh_status s;
  {
    nb::gil_scoped_release unlocked;
    s = lh_sync_engine_get_global(e, fragment, static_cast<float*>(v.data), v.count);
  }
  if (s != LH_OK) fail(s);
}

}  // namespace longhaul::py
