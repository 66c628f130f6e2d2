#include "group_fixture.hpp"

#include <gtest/gtest.h>

#include <map>
#include <mutex>

namespace longhaul::collective::testing {

LoopbackGroup::LoopbackGroup(net::IoRuntime& io, size_t members, uint16_t connections,
                             uint64_t epoch) {
  views_.resize(members);
  for (size_t r = 0; r < members; ++r) {
    views_[r].epoch = epoch;
    views_[r].rank = r;
    views_[r].size = members;
    views_[r].full_mesh = true;  // every pair is linked below
    views_[r].links.resize(members);
  }
  // Member j accepts from every i < j; the connecting side says who it is with a control message.
  // The handlers own the rendezvous state: one may still be unlocking it after set_value has let
  // this constructor return.
  struct Rendezvous {
    std::mutex mu;
    std::map<std::pair<size_t, size_t>, std::promise<std::shared_ptr<net::Link>>> accepted;
  };
  auto rv = std::make_shared<Rendezvous>();
  for (size_t i = 0; i < members; ++i)
    for (size_t j = i + 1; j < members; ++j) rv->accepted[{i, j}];
  for (size_t j = 0; j < members; ++j) {
    auto l = net::Listener::create(io, "127.0.0.1", 0, {});
    EXPECT_TRUE(l.is_ok());
    listeners_.push_back(*l);
    listeners_.back()->start([rv, j](std::shared_ptr<net::Link> link, net::Role) {
      std::weak_ptr<net::Link> weak = link;
      link->start([rv, j, weak](std::vector<std::byte> hello) {
        std::lock_guard lock(rv->mu);
        if (auto shared = weak.lock())
          rv->accepted[{static_cast<size_t>(hello[0]), j}].set_value(shared);
      });
    });
  }
  for (size_t i = 0; i < members; ++i)
    for (size_t j = i + 1; j < members; ++j) {
      auto link = net::connect_link(io, "127.0.0.1", listeners_[j]->port(), connections, {});
      EXPECT_TRUE(link.is_ok()) << link.status().to_string();
      (*link)->start();
      (*link)->send_control({static_cast<std::byte>(i)});
      views_[i].links[j] = *link;
    }
  for (auto& [pair, promise] : rv->accepted)
    views_[pair.second].links[pair.first] = promise.get_future().get();
}

LoopbackGroup::~LoopbackGroup() {
  for (auto& v : views_)
    for (auto& l : v.links)
      if (l) l->close();
  for (auto& l : listeners_) l->close();
}

void LoopbackGroup::kill(size_t rank) {
  for (auto& l : views_[rank].links)
    if (l) l->close(peer_lost("member killed by the test"));
}

}  // namespace longhaul::collective::testing
