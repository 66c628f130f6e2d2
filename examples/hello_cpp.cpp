// hello_cpp: the C++ API (longhaul.hpp): a master and one peer on loopback, connect, print the
// world size and the ring, leave. Errors arrive as longhaul::Error carrying the lh_status.
#include <cstdio>
#include <string>

#include <longhaul/longhaul.hpp>

int main() {
  try {
    longhaul::MasterOptions master_options;
    master_options.listen_address = "127.0.0.1:0";
    longhaul::Master master(master_options);
    master.run();

    longhaul::CommunicatorOptions options;
    options.master_address = "127.0.0.1:" + std::to_string(master.port());
    options.listen_address = "127.0.0.1:0";
    longhaul::Communicator comm(options);
    comm.connect();
    if (comm.peers_pending()) comm.update_topology();
    std::string ring;
    for (uint64_t id : comm.ring()) ring += " " + std::to_string(id);
    std::printf("longhaul %s: world size %lld in epoch %llu, ring [%s ]\n",
                longhaul::version().c_str(), static_cast<long long>(comm.world_size()),
                static_cast<unsigned long long>(comm.epoch()), ring.c_str());
    comm.leave("hello_cpp is done");
    master.stop();
    return 0;
  } catch (const longhaul::Error& e) {
    std::fprintf(stderr, "hello_cpp: %s\n", e.what());
    return 1;
  }
}
