// lh_op_*: the C face of a collective operation in flight (collective/operation.hpp), whatever
// started it.
#include "capi/handles.hpp"

namespace lh = longhaul;

extern "C" lh_status lh_op_test(lh_op* op, int* done) {
  if (!op || !done) return lh::capi::null_argument("lh_op_test");
  *done = op->impl->test() ? 1 : 0;
  return LH_OK;
}

extern "C" lh_status lh_op_wait(lh_op* op) {
  if (!op) return lh::capi::null_argument("lh_op_wait");
  return lh::capi::finish(op, op->impl->wait());
}

extern "C" lh_status lh_op_cancel(lh_op* op) {
  if (!op) return lh::capi::null_argument("lh_op_cancel");
  op->impl->abort(lh::aborted_error("cancelled by the caller"));
  return LH_OK;
}

extern "C" lh_status lh_op_get_info(const lh_op* op, lh_op_info* info) {
  if (!op || !info) return lh::capi::null_argument("lh_op_get_info");
  const auto i = op->impl->info();
  info->bytes_sent = i.bytes_sent;
  info->bytes_received = i.bytes_received;
  info->world_size = static_cast<uint32_t>(i.world_size);
  info->schedule = static_cast<lh_schedule>(i.schedule);
  return LH_OK;
}

extern "C" const char* lh_op_last_error(const lh_op* op) {
  if (!op) return "";
  longhaul::MutexLock lock(op->mu);
  return op->last_error.c_str();
}

extern "C" void lh_op_destroy(lh_op* op) {
  if (!op) return;
  (void)op->impl->wait();  // the buffers stay in use until the operation completes
  delete op;
}

lh_status lh::capi::wait_and_destroy(lh_comm* comm, lh_op* op, lh_op_info* info) {
  lh_status s = lh_op_wait(op);
  if (s != LH_OK) finish(comm, op->impl->status());
  if (info) lh_op_get_info(op, info);
  lh_op_destroy(op);
  return s;
}
