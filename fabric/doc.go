// Package fabric moves bulk data as flows over links and shares link
// capacity between concurrent flows by max-min fairness.
//
// Its real-world counterpart is SimGrid's LV08 network model (Velho and
// Legrand, "Accuracy study and improvement of network simulation in the
// SimGrid framework", 2009): a flow first pays its route's latency, then
// transfers its bytes at a rate that max-min fairness (progressive filling)
// assigns it, recomputed whenever a flow starts or ends. LV08's three
// factors are here by their SimGrid names (Factors): bandwidth (0.97 in
// SimGrid, the share of nominal capacity TCP achieves), latency (13.01, the
// slow-start penalty) and cross traffic (0.05, the reverse-direction load
// of ACKs). dmalab's own factors come from measurement and are printed
// with results.
//
// A Link is any capacity a transfer consumes: the lanes of a PCIe link per
// direction, a root complex, an inter-socket link (UPI, xGMI), NVLink, the
// DRAM channels of a NUMA node or a GPU's HBM (Shared: reads and writes
// compete for one bus), even a CPU thread's memcpy rate (better expressed
// as a MaxRate cap on the flow). A Node is a vertex between links: an
// endpoint, a switch, a memory. A Route is a list of hops, each a link
// crossed in one direction with a weight (bytes the hop carries per byte of
// the flow), found by Fabric.Route or built by hand for paths that are not
// graph paths (an in-HBM copy crosses the HBM link with weight 2).
//
// Sharing is plain max-min by default: every flow on a bottleneck gets an
// equal share, whatever its route. That is how the links modelled here
// arbitrate: PCIe switch ports and root ports, NVLink and memory
// controllers serve requesters round robin (weighted at most by
// configuration, never by distance), and a DMA engine's throughput does
// not depend on a round-trip time the way a TCP window does. LV08's
// weighted max-min (Factors.WeightS, SimGrid's network/weight-S; the
// platform's "fabric: {sharing: lv08}") is there for networks of TCP
// flows: a flow's sharing penalty is its route's latency plus weight-S
// over each crossed link's bandwidth, as in NetworkCm02Model::communicate
// (src/surf/network_cm02.cpp, SimGrid 3.32), and its share is inversely
// proportional to it, so flows on short, fast routes get more of a shared
// link (TCP's RTT unfairness). SimGrid's TCP-gamma window bound is not
// modelled.
//
// Invariants:
//
//   - No per-byte or per-packet events: a flow costs one event for its
//     latency phase and shares one fabric-wide completion timer; the fabric
//     costs one recompute per instant at which flows become active or end,
//     however many do (a burst of 1000 starts is one recompute, and so is
//     an end whose completion callback starts the next flow with no
//     latency: the recompute is scheduled after the ends' callbacks).
//     Where the engine's run loop would run the fabric's own events next
//     (the recompute, an activation, the completion timer), the event
//     before them does their work at once instead, at the time and in the
//     order they would have run, with the same sequence numbers and count
//     of fired events (Fabric.tail; sim.Engine.RunsNext and TakeNext): a
//     flow whose activation and end each come alone in their instant costs
//     no recompute event, and a timer due before anything else no event.
//   - A recompute shares anew only the connected component (resources
//     joined by the flows that load them) that the flows started or ended
//     since the last one reach; max-min is separable over components, so
//     the others keep their rates. It works over groups: the active flows
//     with the same hops, cap and share, which always get the same rate
//     (from 256 active flows on; below, every flow is its own group and
//     the arithmetic is that of a filling over flows, bit for bit, but
//     for flows alike that become active at one instant, which share one
//     group summed flow by flow: the same arithmetic). A group keeps its
//     own progress and a heap of its flows by remaining bytes, so an end
//     costs O(log n). When every change is a flow alone on its resources
//     (or the end of one, leaving its resources empty or to one group
//     alone on its own), the recompute takes the rates the filling would
//     give those groups in closed form, with the filling's operations,
//     and fills nothing. A recompute's cost is O(G) for G
//     groups (their progress, the earliest end) plus, for the component's
//     Gc groups of at most H loads and Rc resources, O(Gc·H) to freeze
//     and count the link directions, O(Gc·H) to set up (O(Rc) when every
//     active flow is uncapped and loads each resource by a small integer
//     weight × share: each resource then keeps its sums as flows join and
//     leave, exact in any order), and per filling step either a scan of
//     a dense array of the levels of its resources (Rc ≤ 1,024) or, for
//     larger components, O(moved·log) on a heap of levels where only the
//     resources of the groups a step froze move.
//   - A flow's owner may give it back once done (Fabric.Release): a later
//     Start reuses it instead of allocating one, so a stream of flows
//     whose owners release them allocates nothing. Only while no hook
//     listens, since a hook may keep the flows it sees.
//   - Routes are computed per pair on demand; at most 64 per-destination
//     distance arrays and 16,384 routes are cached, so memory does not
//     grow with the square of the nodes. What a flow's route gives (its
//     loads, share, latency) is derived once per route and shared by its
//     flows and groups (at most 4,096 routes kept).
//   - After every recompute each resource carries at most its effective
//     capacity (up to float64 rounding), and every transferring flow is
//     either at its MaxRate or crosses a saturated resource on which no
//     other flow has a higher rate per unit of share (max-min optimality;
//     under plain sharing every share is 1).
//   - A flow never completes early: its completion time is rounded up to a
//     whole picosecond (sim.TransferTime) and is recomputed only when its
//     rate changes, so a flow whose rate never changes ends exactly at
//     start + latency + ceil(bytes/rate) (a flow that joined a group of
//     several: to the rounding of the group's progress).
//   - Determinism: groups are visited in creation order (a slice,
//     compacted in order when groups empty), flows ending at one instant
//     end in activation order, resources in the
//     order flows first load them (ties between equal levels go to the
//     first loaded), links and nodes in creation order; no Go map is ever
//     iterated. The same inputs give the same rates, end times
//     and observer events.
//
// A Fabric is not safe for concurrent use; like the engine it runs on, it
// is driven from one goroutine (events and sim.Procs).
package fabric
