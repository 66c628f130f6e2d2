#include "train/checkpoint.hpp"

#include <xxhash.h>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

namespace longhaul::train {

static_assert(std::endian::native == std::endian::little, "checkpoints are little-endian");

namespace {

constexpr char kMagic[8] = {'L', 'H', 'T', 'R', 'A', 'I', 'N', '1'};
constexpr std::uint32_t kVersion = 1;

class Writer {
 public:
  template <class T>
  void put(const T& v) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  void put_floats(std::span<const float> f) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(f.data());
    bytes_.insert(bytes_.end(), p, p + f.size_bytes());
  }
  std::vector<std::uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<std::uint8_t> bytes_;
};

class Reader {
 public:
  explicit Reader(const std::vector<std::uint8_t>& bytes, std::size_t end)
      : bytes_(bytes), end_(end) {}
  template <class T>
  bool get(T* v) {
    if (end_ - pos_ < sizeof(T)) return false;
    std::memcpy(v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool get_floats(std::span<float> f) {
    if ((end_ - pos_) / sizeof(float) < f.size()) return false;
    std::memcpy(f.data(), bytes_.data() + pos_, f.size_bytes());
    pos_ += f.size_bytes();
    return true;
  }
  bool at_end() const { return pos_ == end_; }

 private:
  const std::vector<std::uint8_t>& bytes_;
  std::size_t end_;
  std::size_t pos_ = 0;
};

}  // namespace

Status save_checkpoint(const std::string& path, Trainer& trainer) {
  const GptConfig& c = trainer.model().config();
  Writer w;
  for (char ch : kMagic) w.put(ch);
  w.put(kVersion);
  for (int v : {c.vocab, c.context, c.layers, c.channels, c.heads})
    w.put(static_cast<std::int32_t>(v));
  w.put(static_cast<std::int64_t>(trainer.step_count()));
  w.put(static_cast<std::uint64_t>(trainer.data_index()));
  w.put(static_cast<std::int64_t>(trainer.optimizer().steps_taken()));
  w.put(static_cast<std::uint64_t>(trainer.model().params().size()));
  w.put_floats(trainer.model().params());
  w.put_floats(trainer.optimizer().m());
  w.put_floats(trainer.optimizer().v());
  w.put(static_cast<std::uint64_t>(XXH64(w.bytes().data(), w.bytes().size(), 0)));

  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return io_error("cannot create " + tmp);
    out.write(reinterpret_cast<const char*>(w.bytes().data()),
              static_cast<std::streamsize>(w.bytes().size()));
    out.flush();
    if (!out) return io_error("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return io_error("cannot rename " + tmp + " to " + path);
  }
  return Status::ok();
}

Status load_checkpoint(const std::string& path, Trainer& trainer) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error("cannot open checkpoint " + path);
  const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                        std::istreambuf_iterator<char>());
  const auto corrupt = [&](const std::string& why) {
    return io_error("checkpoint " + path + " is not usable: " + why);
  };
  if (bytes.size() < sizeof(kMagic) + sizeof(std::uint64_t)) return corrupt("too short");
  const std::size_t body = bytes.size() - sizeof(std::uint64_t);
  std::uint64_t stored_hash = 0;
  std::memcpy(&stored_hash, bytes.data() + body, sizeof(stored_hash));
  if (XXH64(bytes.data(), body, 0) != stored_hash) return corrupt("checksum mismatch");

  Reader r(bytes, body);
  char magic[8];
  for (char& ch : magic) r.get(&ch);
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) return corrupt("not a trainer checkpoint");
  std::uint32_t version = 0;
  if (!r.get(&version) || version != kVersion) return corrupt("unsupported version");
  std::int32_t dims[5];
  for (std::int32_t& d : dims) {
    if (!r.get(&d)) return corrupt("truncated header");
  }
  const GptConfig saved{dims[0], dims[1], dims[2], dims[3], dims[4]};
  const GptConfig& c = trainer.model().config();
  if (!(saved == c)) {
    return invalid_argument(
        "checkpoint " + path + " is for a different model (vocab/context/layers/channels/heads " +
        std::to_string(saved.vocab) + "/" + std::to_string(saved.context) + "/" +
        std::to_string(saved.layers) + "/" + std::to_string(saved.channels) + "/" +
        std::to_string(saved.heads) + ")");
  }
  std::int64_t step = 0, adam_steps = 0;
  std::uint64_t data_index = 0, n = 0;
  if (!r.get(&step) || !r.get(&data_index) || !r.get(&adam_steps) || !r.get(&n)) {
    return corrupt("truncated header");
  }
  if (n != trainer.model().params().size()) return corrupt("parameter count mismatch");
  // Read into copies first so a bad file leaves the trainer untouched.
  std::vector<float> params(n), m(n), v(n);
  if (!r.get_floats(params) || !r.get_floats(m) || !r.get_floats(v) || !r.at_end()) {
    return corrupt("truncated or oversized tensors");
  }
  std::copy(params.begin(), params.end(), trainer.model().params().begin());
  std::copy(m.begin(), m.end(), trainer.optimizer().m().begin());
  std::copy(v.begin(), v.end(), trainer.optimizer().v().begin());
  trainer.optimizer().set_steps_taken(adam_steps);
  trainer.restore_counters(step, data_index);
  return Status::ok();
}

}  // namespace longhaul::train
