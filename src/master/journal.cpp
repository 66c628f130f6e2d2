#include "master/journal.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <xxhash.h>

namespace longhaul::master {
namespace {

constexpr char kMagic[] = "longhaul-master-journal 1";

Status io_failure(const std::string& what, const std::string& path) {
  return Status(LH_ERR_IO, fmt::format("{} {}: {}", what, path, std::strerror(errno)));
}

std::string body(const Journal::Ceilings& c) {
  return fmt::format("{} last_id={} last_epoch={}", kMagic, c.last_id, c.last_epoch);
}

uint64_t checksum(const std::string& text) {
  return XXH64(text.data(), text.size(), 0);
}

// Writes all of `text` to `fd` and flushes it to the disk.
Status write_synced(int fd, const std::string& text, const std::string& path) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_failure("cannot write the journal", path);
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return io_failure("cannot fsync the journal", path);
  return Status::ok();
}

// The rename is durable only once the directory entry is.
Status sync_directory(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return io_failure("cannot open the journal's directory", dir);
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return io_failure("cannot fsync the journal's directory", dir);
  return Status::ok();
}

}  // namespace

std::string Journal::format(const Ceilings& c) {
  const std::string text = body(c);
  return fmt::format("{} check={:016x}\n", text, checksum(text));
}

Result<Journal::Ceilings> Journal::parse(const std::string& text) {
  const auto bad = [](const std::string& why) { return Status(LH_ERR_PROTOCOL, why); };
  if (text.empty()) return bad("the file is empty");
  if (text.back() != '\n') return bad("the line is truncated (no final newline)");
  const size_t at = text.rfind(" check=");
  if (at == std::string::npos) return bad("no checksum");
  const std::string checked = text.substr(0, at);
  const std::string hex = text.substr(at + 7, text.size() - at - 8);
  if (hex.size() != 16 || hex.find_first_not_of("0123456789abcdef") != std::string::npos)
    return bad("a malformed checksum");
  if (std::stoull(hex, nullptr, 16) != checksum(checked)) return bad("the checksum does not match");
  Ceilings c;
  std::istringstream in(checked);
  std::string magic_a, magic_b, id, epoch, extra;
  in >> magic_a >> magic_b >> id >> epoch;
  if (magic_a + " " + magic_b != kMagic) return bad("not a longhaul master journal (version 1)");
  if (in >> extra) return bad("trailing fields");
  const auto number = [](const std::string& field, const char* key, uint64_t* out) {
    const std::string prefix = std::string(key) + "=";
    if (field.rfind(prefix, 0) != 0 || field.size() == prefix.size() ||
        field.find_first_not_of("0123456789", prefix.size()) != std::string::npos ||
        field.size() - prefix.size() > 19)
      return false;
    *out = std::stoull(field.substr(prefix.size()));
    return true;
  };
  if (!number(id, "last_id", &c.last_id) || !number(epoch, "last_epoch", &c.last_epoch))
    return bad("malformed fields");
  return c;
}

Result<std::unique_ptr<Journal>> Journal::open(const std::string& path, Found* found) {
  *found = Found{};
  std::unique_ptr<Journal> journal(new Journal(path));
  std::ifstream in(path, std::ios::binary);
  if (in) {
    found->existed = true;
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.size() > 4096) text.resize(4096);  // a valid journal is one short line
    auto parsed = parse(text);
    if (parsed)
      found->ceilings = journal->ceilings_ = *parsed;
    else
      found->corrupt = parsed.status().message();
  }
  // Proves now that the journal can be written (and gives a corrupt one a valid form).
  LH_RETURN_IF_ERROR(journal->write(journal->ceilings_));
  return journal;
}

Status Journal::cover(uint64_t id, uint64_t epoch) {
  if (id <= ceilings_.last_id && epoch <= ceilings_.last_epoch) return Status::ok();
  Ceilings next = ceilings_;
  if (id > next.last_id) next.last_id = id + kLease;
  if (epoch > next.last_epoch) next.last_epoch = epoch + kLease;
  return write(next);
}

Status Journal::reserve(const Ceilings& c) {
  Ceilings next{std::max(c.last_id, ceilings_.last_id),
                std::max(c.last_epoch, ceilings_.last_epoch)};
  return write(next);
}

Status Journal::write(const Ceilings& c) {
  const std::string tmp = path_ + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_failure("cannot create the journal", tmp);
  Status s = write_synced(fd, format(c), tmp);
  ::close(fd);
  if (s && ::rename(tmp.c_str(), path_.c_str()) != 0)
    s = io_failure("cannot replace the journal", path_);
  if (s) s = sync_directory(path_);
  if (!s) {
    ::unlink(tmp.c_str());
    return s;
  }
  ceilings_ = c;
  return Status::ok();
}

}  // namespace longhaul::master
