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
// Invariants:
//
//   - No per-byte or per-packet events: a flow costs one event for its
//     latency phase and shares one fabric-wide completion timer; the fabric
//     costs one recompute per instant at which flows become active or end,
//     however many do (a burst of 1000 starts is one recompute).
//   - One recompute is O(F·H + R·S) for F transferring flows of at most H
//     loads each, R loaded resources and S ≤ R + C filling steps (C flows
//     with a MaxRate cap), plus O(C log C) to order the caps.
//   - After every recompute each resource carries at most its effective
//     capacity (up to float64 rounding), and every transferring flow is
//     either at its MaxRate or crosses a saturated resource on which no
//     other flow has a higher rate (max-min optimality).
//   - A flow never completes early: its completion time is rounded up to a
//     whole picosecond (sim.TransferTime) and is recomputed only when its
//     rate changes, so a flow whose rate never changes ends exactly at
//     start + latency + ceil(bytes/rate).
//   - Determinism: flows are visited in activation order (the active set is
//     a slice, compacted in order when flows end), resources in the
//     order flows first load them, links and nodes in creation order; no Go
//     map is ever iterated. The same inputs give the same rates, end times
//     and observer events.
//
// A Fabric is not safe for concurrent use; like the engine it runs on, it
// is driven from one goroutine (events and sim.Procs).
package fabric
