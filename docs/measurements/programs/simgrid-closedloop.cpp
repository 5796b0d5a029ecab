// The closed-loop workload of fabric's BenchmarkClosedLoop
// (fabric/scale_bench_test.go) in SimGrid's S4U, to run side by side with
// it (docs/measurements/2026-11-29-scale-fabric.md).
//
// Endpoints under switches under one core: 10 GB/s endpoint-switch and
// 40 GB/s switch-core split-duplex links, no latency, in a full zone with
// an explicit route for every pair of endpoints. n actors (slots) each run
// total/n transfers one after the other with Comm::sendto; slot s's k-th is
// drawn by splitmix64(s*1000003+k) exactly as the Go benchmark draws it, so
// both run the same flows whatever order the actors run in.
//
// Usage: simgrid-closedloop SWITCHES PER_SWITCH FLOWS TOTAL [--cfg=...]
// Run it with --cfg=network/model:CM02 --cfg=network/crosstraffic:0 and
// --cfg=network/optim:Full or Lazy (simgrid-closedloop.sh does).
// It prints the simulated end, and the CPU seconds (user+sys) and wall
// seconds of the simulation itself, the platform's set-up excluded as the
// Go benchmark excludes it.
#include <simgrid/s4u.hpp>

#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace sg4 = simgrid::s4u;

static uint64_t splitmix64(uint64_t x)
{
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

static std::vector<sg4::Host*> endpoints;
static int per_slot;
static long ended;

static void slot(uint64_t s)
{
  const uint64_t n = endpoints.size();
  for (int k = 0; k < per_slot; k++) {
    uint64_t x    = splitmix64(s * 1000003 + uint64_t(k));
    uint64_t from = x % n;
    uint64_t to   = (from + 1 + (x >> 16) % (n - 1)) % n;
    uint64_t size = 1000000 + (x >> 32) % 9000001;
    sg4::Comm::sendto(endpoints[from], endpoints[to], size);
    ended++;
  }
}

static double cpu_seconds()
{
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

int main(int argc, char** argv)
{
  sg4::Engine e(&argc, argv);
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s SWITCHES PER_SWITCH FLOWS TOTAL [--cfg=...]\n", argv[0]);
    return 2;
  }
  const int switches = std::atoi(argv[1]), per_switch = std::atoi(argv[2]);
  const int flows = std::atoi(argv[3]), total = std::atoi(argv[4]);
  per_slot = total / flows;

  auto* zone = sg4::create_full_zone("world");
  std::vector<sg4::Link*> edge, up;
  std::vector<int> switch_of;
  for (int s = 0; s < switches; s++) {
    up.push_back(zone->create_split_duplex_link("up" + std::to_string(s), 40e9)->set_latency(0)->seal());
    for (int i = 0; i < per_switch; i++) {
      int ep = s * per_switch + i;
      endpoints.push_back(zone->create_host("ep" + std::to_string(ep), 1e9)->seal());
      edge.push_back(zone->create_split_duplex_link("edge" + std::to_string(ep), 10e9)->set_latency(0)->seal());
      switch_of.push_back(s);
    }
  }
  // UP is the direction from an endpoint towards the core, as AtoB is in
  // the Go topology (an edge link joins endpoint to switch, an up link
  // switch to core).
  using D = sg4::LinkInRoute::Direction;
  const int n = int(endpoints.size());
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++) {
      if (a == b)
        continue;
      std::vector<sg4::LinkInRoute> route{{edge[a], D::UP}};
      if (switch_of[a] != switch_of[b]) {
        route.emplace_back(up[switch_of[a]], D::UP);
        route.emplace_back(up[switch_of[b]], D::DOWN);
      }
      route.emplace_back(edge[b], D::DOWN);
      zone->add_route(endpoints[a]->get_netpoint(), endpoints[b]->get_netpoint(), nullptr, nullptr, route, false);
    }
  zone->seal();

  for (int s = 0; s < flows; s++)
    sg4::Actor::create("slot" + std::to_string(s), endpoints[s % n], slot, uint64_t(s));

  double cpu0 = cpu_seconds();
  auto wall0  = std::chrono::steady_clock::now();
  e.run();
  double cpu  = cpu_seconds() - cpu0;
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  if (ended != long(per_slot) * flows) {
    std::fprintf(stderr, "%ld flows ended, want %ld\n", ended, long(per_slot) * flows);
    return 1;
  }
  std::printf("endpoints=%d flows=%d total=%ld sim-s=%.9f cpu-s=%.3f wall-s=%.3f flows/cpu-s=%.0f\n", n, flows, ended,
              sg4::Engine::get_clock(), cpu, wall, double(ended) / cpu);
  return 0;
}
