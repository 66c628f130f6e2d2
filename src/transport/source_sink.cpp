#include "transport/source_sink.hpp"

#include <utility>

namespace longhaul::transport {
namespace {

class HostSource final : public Source {
 public:
  explicit HostSource(std::span<const std::byte> bytes) : bytes_(bytes) {}
  void when_ready(Ready ready) override { ready(bytes_); }

 private:
  std::span<const std::byte> bytes_;
};

class HostSink final : public Sink {
 public:
  explicit HostSink(std::span<std::byte> bytes) : bytes_(bytes) {}
  void when_ready(Ready ready) override { ready(bytes_); }
  void land(Status how, Completion done) override { done(std::move(how)); }

 private:
  std::span<std::byte> bytes_;
};

class HostStaging final : public Staging {
 public:
  std::shared_ptr<Source> source(std::span<const std::byte> bytes) const override {
    return std::make_shared<HostSource>(bytes);
  }
  std::shared_ptr<Sink> sink(std::span<std::byte> bytes) const override {
    return std::make_shared<HostSink>(bytes);
  }
};

}  // namespace

const Staging& host_staging() {
  static const HostStaging staging;
  return staging;
}

void send_from(std::shared_ptr<DataLink> link, Tag tag, std::shared_ptr<Source> source,
               Completion done) {
  Source& from = *source;
  // The source lives until its send completes: a staging slot is reused only after that.
  from.when_ready([link = std::move(link), tag, source = std::move(source),
                   done = std::move(done)](Result<std::span<const std::byte>> bytes) mutable {
    if (!bytes) return done(bytes.status());
    link->send(tag, *bytes, [source = std::move(source), done = std::move(done)](Status s) {
      done(std::move(s));
    });
  });
}

void recv_into(std::shared_ptr<DataLink> link, Tag tag, std::shared_ptr<Sink> sink,
               Completion done) {
  Sink& into = *sink;
  into.when_ready([link = std::move(link), tag, sink = std::move(sink),
                   done = std::move(done)](Result<std::span<std::byte>> bytes) mutable {
    if (!bytes) return done(bytes.status());
    link->recv(tag, *bytes, [sink = std::move(sink), done = std::move(done)](Status s) mutable {
      Sink& landing = *sink;
      landing.land(std::move(s), [sink = std::move(sink), done = std::move(done)](Status landed) {
        done(std::move(landed));
      });
    });
  });
}

}  // namespace longhaul::transport
