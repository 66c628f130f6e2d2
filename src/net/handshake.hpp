// The connection handshake: who is talking, which protocol version, and mutual proof of the
// cluster secret.
//
//   client -> HELLO      magic, version, role, client nonce, link id, connection index/count
//   server -> HELLO_ACK  version, role, whether a secret is required, server nonce, server MAC
//   client -> AUTH       client MAC
//   server -> ACCEPT     (or REJECT with a reason at any step)
//
// MACs are HMAC-SHA256 over the cluster secret of a transcript that binds both nonces, the link
// identity and, on TLS, the channel's exported keying material, so a reply cannot be replayed on
// another connection or relayed through a man in the middle. Without a secret on both sides the
// MAC fields are all zero and only the magic and version are checked.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.hpp"

namespace longhaul::net {

inline constexpr uint64_t kHandshakeMagic = 0x4C55414848474E4FULL;  // "ONGHHAUL"-ish, fixed forever
// Bumped whenever a message changes shape or a message is added (2: ABORT carries a status code;
// 3: STATE_SOURCE_LOST; 4: STATE_BLOCKS_Z carries the source's compression time; 5: REGISTER
// names the peer's node and rail, NODE_WAITING; 6: PEER_STATS; 7: REJOIN, and TOPOLOGY as a
// change to the receiver's epoch; 8: REGISTER and REJOIN say whether the peer links as a full
// mesh; 9: NODE_AGREE and NODE_AGREED; 10: REJOIN carries the rail's last node agreement answer,
// NODE_AGREE no longer the previous one; 11: PEER_STATS carries the overlap's figures; 12:
// BATCH_REPORT says whether the member's deadline passed; 13: ABORT_REQUEST; 14: every
// collective's signature transfer, and a CANCEL frame may carry a mismatch's reason).
inline constexpr uint16_t kProtocolVersion = 14;
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;
inline constexpr uint16_t kMaxConnectionsPerLink = 64;

// The code of a REJECT that means "not now, try again shortly" (the listener holds as many
// unauthenticated connections from the client's address as it allows). Connecting code retries
// on it with backoff; no other refusal uses this code.
inline constexpr lh_status kRetryLaterCode = LH_ERR_ABORTED;
inline bool is_retry_later(const Status& s) {
  return s.code() == kRetryLaterCode;
}

using Nonce = std::array<std::byte, kNonceBytes>;
using Mac = std::array<std::byte, kMacBytes>;

enum class Role : uint8_t { kPeer = 1, kMaster = 2, kTool = 3 };
const char* role_name(Role r);

struct HelloMessage {
  uint64_t magic = kHandshakeMagic;
  uint16_t version = kProtocolVersion;
  Role role = Role::kPeer;
  Nonce nonce{};
  uint64_t link_id = 0;
  uint16_t connection_index = 0;
  uint16_t connection_count = 1;
};

struct HelloAckMessage {
  uint16_t version = kProtocolVersion;
  Role role = Role::kPeer;
  bool secret_required = false;
  Nonce nonce{};
  Mac mac{};
};

struct AuthMessage {
  Mac mac{};
};

struct RejectMessage {
  lh_status code = LH_ERR_PROTOCOL;
  std::string reason;
};

std::vector<std::byte> encode(const HelloMessage& m);
std::vector<std::byte> encode(const HelloAckMessage& m);
std::vector<std::byte> encode(const AuthMessage& m);
std::vector<std::byte> encode(const RejectMessage& m);
// Decoders check structure only (lengths, enum ranges, trailing bytes); semantic checks such as
// the magic and the version are the handshake's, so it can reply with a precise reason.
Status decode(std::span<const std::byte> in, HelloMessage* m);
Status decode(std::span<const std::byte> in, HelloAckMessage* m);
Status decode(std::span<const std::byte> in, AuthMessage* m);
Status decode(std::span<const std::byte> in, RejectMessage* m);

// Which side of the handshake a MAC proves.
enum class MacSide : uint8_t { kServer = 1, kClient = 2 };

// HMAC-SHA256(secret, side || hello fields || server nonce || channel binding).
Mac compute_mac(std::string_view secret, MacSide side, const HelloMessage& hello,
                const Nonce& server_nonce, std::span<const std::byte> channel_binding);
// Constant-time comparison.
bool mac_equal(const Mac& a, const Mac& b);
Nonce random_nonce();
uint64_t random_u64();

}  // namespace longhaul::net
