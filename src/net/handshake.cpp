#include "net/handshake.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>

#include <fmt/format.h>

#include "wire/codec.hpp"

namespace longhaul::net {

const char* role_name(Role r) {
  switch (r) {
    case Role::kPeer: return "peer";
    case Role::kMaster: return "master";
    case Role::kTool: return "tool";
  }
  return "unknown";
}

static Status decode_role(wire::Reader& r, Role* role) {
  uint8_t v;
  LH_RETURN_IF_ERROR(r.u8(&v));
  if (v < static_cast<uint8_t>(Role::kPeer) || v > static_cast<uint8_t>(Role::kTool))
    return protocol_error(fmt::format("unknown role {}", v));
  *role = static_cast<Role>(v);
  return Status::ok();
}

std::vector<std::byte> encode(const HelloMessage& m) {
  wire::Writer w;
  w.u64(m.magic);
  w.u16(m.version);
  w.u8(static_cast<uint8_t>(m.role));
  w.raw(m.nonce);
  w.u64(m.link_id);
  w.u16(m.connection_index);
  w.u16(m.connection_count);
  return w.take();
}

Status decode(std::span<const std::byte> in, HelloMessage* m) {
  wire::Reader r(in);
  // Magic and version come first and are readable even if the rest is not ours, so a peer of
  // another version still gets a precise answer.
  LH_RETURN_IF_ERROR(r.u64(&m->magic));
  LH_RETURN_IF_ERROR(r.u16(&m->version));
  if (m->magic != kHandshakeMagic || m->version != kProtocolVersion) return Status::ok();
  LH_RETURN_IF_ERROR(decode_role(r, &m->role));
  LH_RETURN_IF_ERROR(r.raw(m->nonce));
  LH_RETURN_IF_ERROR(r.u64(&m->link_id));
  LH_RETURN_IF_ERROR(r.u16(&m->connection_index));
  LH_RETURN_IF_ERROR(r.u16(&m->connection_count));
  return r.expect_end();
}

std::vector<std::byte> encode(const HelloAckMessage& m) {
  wire::Writer w;
  w.u16(m.version);
  w.u8(static_cast<uint8_t>(m.role));
  w.boolean(m.secret_required);
  w.raw(m.nonce);
  w.raw(m.mac);
  return w.take();
}

Status decode(std::span<const std::byte> in, HelloAckMessage* m) {
  wire::Reader r(in);
  LH_RETURN_IF_ERROR(r.u16(&m->version));
  LH_RETURN_IF_ERROR(decode_role(r, &m->role));
  LH_RETURN_IF_ERROR(r.boolean(&m->secret_required));
  LH_RETURN_IF_ERROR(r.raw(m->nonce));
  LH_RETURN_IF_ERROR(r.raw(m->mac));
  return r.expect_end();
}

std::vector<std::byte> encode(const AuthMessage& m) {
  wire::Writer w;
  w.raw(m.mac);
  return w.take();
}

Status decode(std::span<const std::byte> in, AuthMessage* m) {
  wire::Reader r(in);
  LH_RETURN_IF_ERROR(r.raw(m->mac));
  return r.expect_end();
}

std::vector<std::byte> encode(const RejectMessage& m) {
  wire::Writer w;
  w.u32(static_cast<uint32_t>(m.code));
  w.string(m.reason);
  return w.take();
}

Status decode(std::span<const std::byte> in, RejectMessage* m) {
  wire::Reader r(in);
  uint32_t code;
  LH_RETURN_IF_ERROR(r.u32(&code));
  if (code == LH_OK || code > LH_ERR_INTERNAL) return protocol_error(fmt::format("invalid reject code {}", code));
  m->code = static_cast<lh_status>(code);
  LH_RETURN_IF_ERROR(r.string(&m->reason, 512));
  return r.expect_end();
}

Mac compute_mac(std::string_view secret, MacSide side, const HelloMessage& hello,
                const Nonce& server_nonce, std::span<const std::byte> channel_binding) {
  wire::Writer transcript;
  transcript.string("longhaul-handshake-v1");
  transcript.u8(static_cast<uint8_t>(side));
  transcript.raw(encode(hello));
  transcript.raw(server_nonce);
  transcript.bytes(channel_binding);
  Mac mac{};
  unsigned int len = 0;
  const auto& t = transcript.buffer();
  if (!HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
            reinterpret_cast<const unsigned char*>(t.data()), t.size(),
            reinterpret_cast<unsigned char*>(mac.data()), &len) ||
      len != kMacBytes) {
    // HMAC-SHA256 cannot fail with valid arguments; if OpenSSL says otherwise, nothing is safe.
    std::abort();
  }
  return mac;
}

bool mac_equal(const Mac& a, const Mac& b) { return CRYPTO_memcmp(a.data(), b.data(), kMacBytes) == 0; }

Nonce random_nonce() {
  Nonce n;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(n.data()), static_cast<int>(n.size())) != 1) std::abort();
  return n;
}

uint64_t random_u64() {
  uint64_t v;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(&v), sizeof(v)) != 1) std::abort();
  return v;
}

}  // namespace longhaul::net
