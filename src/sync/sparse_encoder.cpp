#include "sync/sparse_encoder.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace longhaul::sync {

Result<SparseEncoder> SparseEncoder::make(const Layout& layout,
                                          const quant::sparse::Params& params) {
  LH_RETURN_IF_ERROR(quant::sparse::check_params(params));
  SparseEncoder e;
  e.params_ = params;
  size_t total = 0, largest_encoding = 0;
  for (size_t f = 0; f < layout.fragments(); ++f) {
    const size_t n = layout.fragment_size(f);
    auto most = quant::sparse::max_encoded_size(n, params);
    if (!most) return most.status();
    e.offsets_.push_back(total);
    e.sizes_.push_back(n);
    e.max_encoded_.push_back(*most);
    total += n;
    largest_encoding = std::max(largest_encoding, *most);
  }
  e.residual_.assign(total, 0.0f);
  e.saved_.assign(layout.largest_fragment(), 0.0f);
  e.encoding_.resize(largest_encoding);
  return e;
}

Result<std::span<std::byte>> SparseEncoder::encode(uint32_t f, std::span<const float> delta) {
  if (pending_)
    return internal_error("sparse codec: a fragment was encoded again before its round settled");
  const std::span<float> residual = this->residual(f);
  std::copy(residual.begin(), residual.end(), saved_.begin());
  auto written = quant::sparse::encode_with_error_feedback(
      delta, residual, std::span(encoding_).first(max_encoded_[f]), params_);
  if (!written) return written.status();  // the codec wrote nothing
  saved_fragment_ = f;
  pending_ = true;
  return std::span<std::byte>(encoding_.data(), *written);
}

void SparseEncoder::roll_back() {
  if (!pending_) return;
  const std::span<float> residual = this->residual(saved_fragment_);
  std::copy_n(saved_.begin(), residual.size(), residual.begin());
  pending_ = false;
}

collective::ContributionCheck SparseEncoder::check(uint32_t f) const {
  const uint64_t elements = sizes_[f];
  const uint32_t chunk = static_cast<uint32_t>(params_.chunk);
  const uint32_t topk = static_cast<uint32_t>(std::min(params_.topk, params_.chunk));
  return [elements, chunk, topk](size_t, std::span<const std::byte> bytes) -> Status {
    if (bytes.empty()) return Status::ok();
    auto header = quant::sparse::read_header(bytes);
    if (!header) return header.status();
    if (header->count != elements || header->chunk != chunk || header->topk != topk)
      return protocol_error(fmt::format(
          "it encodes {} elements in chunks of {} with k = {}, not {} in chunks of {} with k = {}",
          header->count, header->chunk, header->topk, elements, chunk, topk));
    return quant::sparse::validate(bytes);
  };
}

uint64_t SparseEncoder::max_round_bytes(uint32_t f, size_t members) const {
  return static_cast<uint64_t>(max_encoded_[f]) * members;
}

size_t SparseEncoder::bytes() const {
  return (residual_.size() + saved_.size()) * sizeof(float) + encoding_.size();
}

}  // namespace longhaul::sync
