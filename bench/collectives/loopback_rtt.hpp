// The round trip of one byte over a TCP connection on 127.0.0.1, between two threads of this
// process (TCP_NODELAY both ways): the unit the collectives' latencies are reported in.
#pragma once

#include <vector>

// `count` round trips after `warmup` untimed ones, in seconds each; empty if a socket call failed.
std::vector<double> loopback_round_trips(int count, int warmup);
