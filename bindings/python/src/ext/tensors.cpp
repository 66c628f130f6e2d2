#include "tensors.hpp"

#include <cmath>
#include <optional>
#include <string>

#include <nanobind/stl/string.h>

namespace nb = nanobind;

namespace longhaul::py {
namespace {

using Array = nb::ndarray<nb::ro>;

bool to_dtype(nb::dlpack::dtype t, lh_dtype* out) {
  if (t.lanes != 1) return false;
  using Code = nb::dlpack::dtype_code;
  const auto code = static_cast<Code>(t.code);
  if (code == Code::Float && t.bits == 32)
    *out = LH_DTYPE_F32;
  else if (code == Code::Float && t.bits == 64)
    *out = LH_DTYPE_F64;
  else if (code == Code::Float && t.bits == 16)
    *out = LH_DTYPE_F16;
  else if (code == Code::Bfloat && t.bits == 16)
    *out = LH_DTYPE_BF16;
  else if (code == Code::Int && t.bits == 8)
    *out = LH_DTYPE_I8;
  else if (code == Code::UInt && t.bits == 8)
    *out = LH_DTYPE_U8;
  else if (code == Code::Int && t.bits == 32)
    *out = LH_DTYPE_I32;
  else if (code == Code::UInt && t.bits == 32)
    *out = LH_DTYPE_U32;
  else if (code == Code::Int && t.bits == 64)
    *out = LH_DTYPE_I64;
  else if (code == Code::UInt && t.bits == 64)
    *out = LH_DTYPE_U64;
  else
    return false;
  return true;
}

bool c_contiguous(const Array& a) {
  int64_t expected = 1;
  for (size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expected) return false;
    expected *= static_cast<int64_t>(a.shape(i));
  }
  return true;
}

[[noreturn]] void fail_type(std::string_view what, const std::string& why) {
  throw nb::type_error((std::string(what) + ": " + why).c_str());
}

[[noreturn]] void fail_value(std::string_view what, const std::string& why) {
  throw nb::value_error((std::string(what) + ": " + why).c_str());
}

// A numpy array (or anything with .flags.writeable) that says it is read-only.
bool read_only(nb::handle obj) {
  if (!nb::hasattr(obj, "flags")) return false;
  nb::object flags = obj.attr("flags");
  return nb::hasattr(flags, "writeable") && !nb::cast<bool>(flags.attr("writeable"));
}

// DLPack's device type for CUDA memory (kDLCUDA) and its stream value for the legacy default
// stream (the array API's `__dlpack__(stream=1)` on CUDA).
constexpr int kDlpackCuda = 2;
constexpr int kLegacyDefaultStream = 1;

// The DLPack export of a producer whose memory is on a CUDA device, ordered for the library. The
// library copies CUDA memory on its own streams, which are blocking streams: ordered after work
// queued on the legacy default stream. Exporting with stream=1 is DLPack's stream handshake with
// the legacy default stream as the consumer's: the producer makes that stream wait (on the GPU,
// by an event) for the work queued so far on the stream that writes the tensor (torch: its
// current stream), and so both of the library's streams come after it; the host never waits.
// nanobind's own import asks for no stream (torch then orders nothing), hence this step. None
// for memory elsewhere, and for a producer without __dlpack_device__ (nanobind imports it).
std::optional<nb::object> export_for_library_streams(nb::handle source) {
  if (!nb::hasattr(source, "__dlpack_device__") || !nb::hasattr(source, "__dlpack__"))
    return std::nullopt;
  nb::tuple device = nb::cast<nb::tuple>(source.attr("__dlpack_device__")());
  if (device.size() < 1 || nb::cast<int>(device[0]) != kDlpackCuda) return std::nullopt;
  return source.attr("__dlpack__")(nb::arg("stream") = kLegacyDefaultStream);
}

}  // namespace

TensorView import_tensor(nb::handle obj, bool writable, std::string_view what) {
  nb::object source = nb::borrow(obj);
  // torch refuses to export a tensor that requires grad; its detached alias is the same memory.
  if (nb::hasattr(obj, "requires_grad") && nb::cast<bool>(obj.attr("requires_grad")))
    source = obj.attr("detach")();
  if (writable && read_only(obj))
    fail_value(what,
               "the array is read-only, and longhaul writes its result into it in place "
               "(pass a writable array, or a separate out=)");
  Array a;
  const std::optional<nb::object> ordered = export_for_library_streams(source);
  if (!nb::try_cast<Array>(ordered ? *ordered : source, a))
    fail_type(what, std::string("expected a tensor or array exporting DLPack (torch.Tensor, "
                                "numpy.ndarray), got ") +
                        nb::inst_name(obj).c_str());
  if (a.device_type() != nb::device::cpu::value && a.device_type() != nb::device::cuda::value)
    fail_value(what, "the tensor is in neither CPU nor CUDA memory");
  TensorView v;
  if (!to_dtype(a.dtype(), &v.dtype))
    fail_type(what,
              "unsupported dtype (longhaul reduces float32, float64, float16, bfloat16, "
              "int8, uint8, int32, uint32, int64, uint64)");
  if (!c_contiguous(a))
    fail_value(what,
               "the tensor is not contiguous (a strided view); pass .contiguous() (torch) "
               "or numpy.ascontiguousarray() and copy the result back");
  v.count = a.size();
  v.data = const_cast<void*>(a.data());
  v.keep = source;  // the producer owns the memory; holding it keeps the memory valid
  return v;
}

lh_reduce_op parse_op(std::string_view op) {
  if (op == "sum") return LH_OP_SUM;
  if (op == "avg" || op == "mean") return LH_OP_AVG;
  if (op == "min") return LH_OP_MIN;
  if (op == "max") return LH_OP_MAX;
  if (op == "prod") return LH_OP_PROD;
  throw nb::value_error(
      ("op must be 'sum', 'avg', 'min', 'max' or 'prod', not '" + std::string(op) + "'").c_str());
}

lh_schedule parse_schedule(std::string_view s) {
  if (s == "auto") return LH_SCHEDULE_AUTO;
  if (s == "ring") return LH_SCHEDULE_RING;
  if (s == "direct") return LH_SCHEDULE_DIRECT;
  throw nb::value_error(
      ("schedule must be 'auto', 'ring' or 'direct', not '" + std::string(s) + "'").c_str());
}

lh_allreduce_options collective_options(nb::handle quant, std::optional<uint32_t> block,
                                        std::string_view schedule, std::optional<double> timeout) {
  lh_allreduce_options o;
  lh_allreduce_options_init(&o);
  o.codec = parse_codec(quant);
  if (block) o.block = *block;
  o.schedule = parse_schedule(schedule);
  if (timeout) {
    const double ms = std::ceil(*timeout * 1000.0);
    if (!(*timeout > 0.0) || !std::isfinite(ms) || ms > 4294967295.0)
      throw nb::value_error("timeout must be a positive number of seconds (below 2^32 ms) or None");
    o.timeout_ms = static_cast<uint32_t>(ms);
  }
  return o;
}

lh_codec parse_codec(nb::handle quant) {
  if (quant.is_none()) return LH_CODEC_NONE;
  if (!nb::isinstance<nb::str>(quant)) throw nb::type_error("quant must be a str or None");
  const std::string q = nb::cast<std::string>(quant);
  if (q == "none") return LH_CODEC_NONE;
  if (q == "fp16") return LH_CODEC_FP16;
  if (q == "bf16") return LH_CODEC_BF16;
  if (q == "u8") return LH_CODEC_U8;
  if (q == "u4") return LH_CODEC_U4;
  if (q == "e3m0") return LH_CODEC_E3M0;
  throw nb::value_error(
      ("quant must be None, 'fp16', 'bf16', 'u8', 'u4' or 'e3m0', not '" + q + "'").c_str());
}

const char* dtype_name(lh_dtype dtype) {
  static constexpr const char* names[] = {"float32", "float64", "float16", "bfloat16", "int8",
                                          "uint8",   "int32",   "uint32",  "int64",    "uint64"};
  const auto i = static_cast<size_t>(dtype);
  return i < std::size(names) ? names[i] : "unknown";
}

}  // namespace longhaul::py
