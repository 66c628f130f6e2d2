#include "sync/checkpoint.hpp"

#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

namespace longhaul::sync {
namespace {

constexpr char kMagic[8] = {'L', 'H', 'S', 'Y', 'N', 'C', '0', '1'};
// 2: eager keeps its outer deviation; 3: its restart point only; 4: the agreed overlap (τ may
// change between cycles), after the staging buffer; 5: the sparse codec's residual, after it.
constexpr uint32_t kVersion = 5;

class Writer {
 public:
  template <class T>
  void put(const T& v) {
    const auto* p = reinterpret_cast<const char*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  template <class T>
  void put_vector(const std::vector<T>& v) {
    put<uint64_t>(v.size());
    const auto* p = reinterpret_cast<const char*>(v.data());
    bytes_.insert(bytes_.end(), p, p + v.size() * sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint32_t>(static_cast<uint32_t>(s.size()));
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  std::vector<char>& bytes() { return bytes_; }

 private:
  std::vector<char> bytes_;
};

class Reader {
 public:
  explicit Reader(const std::vector<char>& b) : b_(b) {}
  template <class T>
  bool get(T* v) {
    if (b_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  template <class T>
  bool get_vector(std::vector<T>* v) {
    uint64_t n = 0;
    if (!get(&n) || n > (b_.size() - pos_) / sizeof(T)) return false;
    v->resize(n);
    if (n > 0) std::memcpy(v->data(), b_.data() + pos_, n * sizeof(T));  // data() may be null
    pos_ += n * sizeof(T);
    return true;
  }
  bool get_string(std::string* s) {
    uint32_t n = 0;
    if (!get(&n) || n > b_.size() - pos_) return false;
    s->assign(b_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool at_end() const { return pos_ == b_.size(); }

 private:
  const std::vector<char>& b_;
  size_t pos_ = 0;
};

void put_state(Writer& w, const EngineCheckpoint& c) {
  w.put_string(c.config);
  w.put_vector(c.counters);
  w.put<uint64_t>(c.theta_g.size());
  for (size_t f = 0; f < c.theta_g.size(); ++f) {
    w.put_vector(c.theta_g[f]);
    w.put_vector(c.momentum[f]);
  }
  w.put_vector(c.last_reset);
  w.put_vector(c.eager_state);
  w.put(c.staged_code);
  w.put<uint8_t>(c.staged_finite);
  w.put_vector(c.staging);  // the delayed methods' next Δ, in flight or not
  w.put_vector(c.overlap);
  w.put_vector(c.residual);
  w.put<uint8_t>(c.in_flight);
  if (!c.in_flight) return;
  w.put(c.fragment);
  w.put(c.number);
  w.put(c.attempts);
  w.put<uint8_t>(c.late);
  w.put<uint8_t>(c.applied);
  w.put_vector(c.masks);
  w.put_vector(c.ring);
}

bool get_state(Reader& r, uint32_t version, EngineCheckpoint* c) {
  uint64_t fragments = 0;
  uint8_t finite = 0, in_flight = 0, late = 0, applied = 0;
  if (!r.get_string(&c->config) || !r.get_vector(&c->counters) || !r.get(&fragments) ||
      fragments > (uint64_t{1} << 20))
    return false;
  c->theta_g.resize(fragments);
  c->momentum.resize(fragments);
  for (size_t f = 0; f < fragments; ++f)
    if (!r.get_vector(&c->theta_g[f]) || !r.get_vector(&c->momentum[f])) return false;
  if (!r.get_vector(&c->last_reset) || !r.get_vector(&c->eager_state) || !r.get(&c->staged_code) ||
      !r.get(&finite) || !r.get_vector(&c->staging))
    return false;
  if (version >= 4 && !r.get_vector(&c->overlap)) return false;
  if (version >= 5 && !r.get_vector(&c->residual)) return false;
  if (!r.get(&in_flight)) return false;
  c->staged_finite = finite != 0;
  c->in_flight = in_flight != 0;
  if (!c->in_flight) return true;
  if (!r.get(&c->fragment) || !r.get(&c->number) || !r.get(&c->attempts) || !r.get(&late) ||
      !r.get(&applied) || !r.get_vector(&c->masks) || !r.get_vector(&c->ring))
    return false;
  c->late = late != 0;
  c->applied = applied != 0;
  return true;
}

}  // namespace

Status write_checkpoint(const std::string& path, const EngineCheckpoint& c) {
  Writer w;
  w.bytes().insert(w.bytes().end(), kMagic, kMagic + sizeof kMagic);
  w.put(kVersion);
  put_state(w, c);
  const uint64_t sum = XXH64(w.bytes().data(), w.bytes().size(), 0);
  w.put(sum);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(w.bytes().data(), static_cast<std::streamsize>(w.bytes().size()));
    if (!out.flush()) return io_error(fmt::format("cannot write {}", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return io_error(fmt::format("cannot rename {} to {}", tmp, path));
  return Status::ok();
}

Result<EngineCheckpoint> read_checkpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error(fmt::format("cannot open the engine checkpoint {}", path));
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto bad = [&](const char* why) {
    return protocol_error(fmt::format("{} is not a usable engine checkpoint: {}", path, why));
  };
  if (bytes.size() < sizeof kMagic + sizeof(uint32_t) + sizeof(uint64_t) ||
      std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return bad("no LHSYNC01 header");
  uint64_t sum = 0;
  std::memcpy(&sum, bytes.data() + bytes.size() - sizeof sum, sizeof sum);
  bytes.resize(bytes.size() - sizeof sum);
  if (XXH64(bytes.data(), bytes.size(), 0) != sum) return bad("checksum mismatch (truncated?)");
  std::vector<char> body(bytes.begin() + sizeof kMagic, bytes.end());
  Reader r(body);
  uint32_t version = 0;
  if (!r.get(&version) || version < 2 || version > kVersion) return bad("unknown version");
  EngineCheckpoint c;
  if (!get_state(r, version, &c) || !r.at_end()) return bad("malformed contents");
  // Version 2 differs only in eager's own state (three vectors then, one now): the other methods'
  // files read the same.
  if (version == 2 && !c.eager_state.empty())
    return bad(
        "an eager checkpoint of version 2 (before eager's restart rule changed): resume "
        "eager from a checkpoint written by this version");
  return c;
}

}  // namespace longhaul::sync
