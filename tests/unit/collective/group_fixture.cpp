#include "group_fixture.hpp"

#include <string>

namespace longhaul::collective::testing {

LinkThreads::LinkThreads(unsigned threads) : work_(asio::make_work_guard(context_)) {
  for (unsigned i = 0; i < threads; ++i) threads_.emplace_back([this] { context_.run(); });
}

LinkThreads::~LinkThreads() {
  work_.reset();
  for (auto& t : threads_) t.join();  // after the completions still queued have run
}

InProcessGroup::InProcessGroup(size_t members, uint64_t epoch) {
  ends_.assign(members, std::vector<std::shared_ptr<transport::InProcessLink>>(members));
  views_.resize(members);
  for (size_t i = 0; i < members; ++i)
    for (size_t j = i + 1; j < members; ++j) {
      auto [a, b] = transport::InProcessLink::pair(
          threads_.executor(), "member " + std::to_string(i), "member " + std::to_string(j));
      ends_[i][j] = std::move(a);
      ends_[j][i] = std::move(b);
    }
  for (size_t r = 0; r < members; ++r) {
    views_[r].epoch = epoch;
    views_[r].rank = r;
    views_[r].size = members;
    views_[r].full_mesh = true;  // every pair is linked
    views_[r].links.assign(ends_[r].begin(), ends_[r].end());
  }
}

InProcessGroup::~InProcessGroup() {
  for_each_end([](transport::InProcessLink& end) { end.fail(closed_error("the group ended")); });
}

void InProcessGroup::kill(size_t rank) {
  for (const auto& end : ends_[rank])
    if (end) end->fail(peer_lost("member killed by the test"));
}

Members::Members(size_t n) {
  for (size_t i = 0; i < n; ++i) {
    pools.push_back(std::make_unique<runtime::WorkerPool>(1));
    engines.push_back(std::make_unique<CollectiveEngine>(*pools.back()));
  }
}

Members::~Members() {
  engines.clear();  // before the pools they post to
}

}  // namespace longhaul::collective::testing
