// The master's journal: one small file, rewritten atomically and fsynced, that keeps the peer ids
// and epochs a master hands out strictly increasing across its restarts.
//
// What a restarted master needs to know about the run it lost is mostly what its members know:
// who is in, the epoch, the rings, the state revisions, the batch decisions. They report it when
// they rejoin (membership_recovery.cpp), and it is fresher than anything a crashed master could
// have written. What no live member can report is the highest id or epoch the old master gave to
// a peer that has since died, or to a newcomer whose WELCOME was still in flight: reusing one
// would let a new peer take an old peer's identity. The journal keeps exactly that, as ceilings
// reserved ahead in leases (so it is written once per kLease ids or epochs, not per event), and
// its presence tells a starting master that it is a restart.
//
// Format: one line of text, "longhaul-master-journal 1 last_id=N last_epoch=N check=HEX", where
// check is the XXH64 of the text before " check=". Anything else is corrupt.
//
// Not thread-safe: the master's strand owns it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.hpp"

namespace longhaul::master {

class Journal {
 public:
  static constexpr uint64_t kLease = 1024;
  struct Ceilings {
    uint64_t last_id = 0;     // no peer id above this was handed out
    uint64_t last_epoch = 0;  // no epoch above this was proposed
  };
  // What open() found.
  struct Found {
    bool existed = false;  // a journal was there: this master is a restart
    Ceilings ceilings;     // valid when existed and corrupt is empty
    std::string corrupt;   // why the file could not be read (it is rewritten), or empty
  };

  // Opens the journal at `path`, reading what an earlier master left (*found). A missing file is a
  // first start; a corrupt or truncated one is reported in found->corrupt, never an error. Fails
  // (LH_ERR_IO) only when the file cannot be written at all: a master that cannot keep its
  // journal must not run with one.
  static Result<std::unique_ptr<Journal>> open(const std::string& path, Found* found);

  // Makes the fsynced ceilings cover `id` and `epoch`, reserving a lease ahead when they do not.
  // LH_ERR_IO when the write fails; the ceilings are then unchanged.
  Status cover(uint64_t id, uint64_t epoch);
  // Raises the ceilings to at least these and writes them (used after a corrupt journal).
  Status reserve(const Ceilings& ceilings);
  const Ceilings& ceilings() const { return ceilings_; }
  const std::string& path() const { return path_; }

  // The file's text for these ceilings, and the parse of a text (exposed for tests).
  static std::string format(const Ceilings& c);
  static Result<Ceilings> parse(const std::string& text);

 private:
  explicit Journal(std::string path) : path_(std::move(path)) {}
  Status write(const Ceilings& c);

  std::string path_;
  Ceilings ceilings_;
};

}  // namespace longhaul::master
