// Package dmadebug is the checker's rule pack for the Linux DMA API: it
// observes every DMA API call (package dma's events) and every memory
// access (package mem's) and records each misuse on a check.Checker as
// a diagnostic with a stable class code, a severity and its provenance:
// the virtual time, the process, the device, the buffer, and the call
// that made the mapping concerned. It imports only the check framework
// and its subjects, dma and mem; Attach hooks a Pack to both.
//
// Its real counterpart is Linux's DMA-API debugging, CONFIG_DMA_API_DEBUG
// (kernel/dma/debug.c). Like debug.c, a Pack keeps one entry per
// active mapping (struct dma_debug_entry: device, bus address, size,
// type, direction, sg nents, physical address, whether
// dma_mapping_error() was called) and checks every unmap, free and sync
// against it (check_unmap, check_sync), every map against the memory it
// maps (check_for_stack, check_for_illegal_area, dma_map_resource of RAM,
// check_sg_segment), every mapping the device may write against the
// cache line it starts in (the active_cacheline radix tree, at most 7
// overlaps), and every driver unbind against the device's pending
// mappings (dma_debug_device_change). Those are 19 classes; Classes
// lists them with the debug.c function behind each.
// Where debug.c and a one-line summary differ, debug.c's condition is the
// one implemented (sync_for_device of a DMA_FROM_DEVICE mapping is a
// finding only with another direction, which is how a receive buffer is
// handed back), and the few places where dmalab deliberately differs say
// so where they are decided: a sync running past its mapping is reported
// as such (debug.c's containing look-up reports it as unknown), the best
// fit is taken when one bus address holds several mappings (debug.c
// gives up), and the overlap count of a cache line is exact (debug.c's
// three tag bits saturate).
//
// Unlike the kernel, the model knows what every byte holds, so three
// classes go beyond debug.c:
//
//   - cpu-access-device-owned: a streaming mapping (single, page or sg;
//     not coherent, not resource) gives its physical memory to the device
//     from the map until the unmap. A sync_for_cpu hands the synced range
//     back to the CPU and a sync_for_device takes it again (the CPU's part
//     is one window per segment; where one window cannot say exactly, the
//     checker stays silent rather than guess). A CPU read or write that
//     touches device-owned memory is reported, once per access, naming
//     the mapping's origin.
//   - stale-read: package mem proves staleness by content versions: every
//     write creates a version, caches and memory carry the version of
//     their bytes, and an access whose bytes are older than the latest
//     write is Stale, with the versions obtained and wanted. The checker
//     reports each such access (CPU or device reader) and names the
//     mapping of that memory, active or recently unmapped: the wrong
//     direction or missing sync behind it.
//   - device-access-unmapped: a device access to bus addresses that the
//     union of the device's active mappings does not cover (use after
//     unmap, a stray descriptor), naming the mapping that was there if it
//     was unmapped recently.
//
// # Errors
//
// The pack never changes what the API returns: package dma returns what
// Linux returns and the pack records the diagnostic. The run goes on;
// check.Options.Notify sees every diagnostic as it is made, for a strict
// mode that stops there.
//
// # Cost and memory
//
// Diagnostic text is built only when there is a finding; a correct call
// allocates nothing. Mappings are indexed by address in buckets of 16 KiB
// chunks, as debug.c hashes dev_addr >> 13 (one index per device by bus
// address, one by physical address for ownership and cache lines), and
// mappings longer than a chunk in an augmented interval treap: a map,
// dma_mapping_error and unmap is O(1) expected for buffers up to 16 KiB
// and O(log L) for the L longer mappings; a CPU access costs a few bucket
// reads. Benchmarks: several million map+unmap pairs per second, flat in
// the number of active mappings. Memory is O(active mappings) plus a ring
// of the last 256 unmapped ones (provenance for double unmaps and use
// after unmap); nothing grows with bytes mapped. A scatter-gather call
// makes at most one diagnostic per class, saying how many of its
// segments were affected (the framework's batch).
//
// Output is deterministic: diagnostics come in order of detection, and
// every choice among mappings (best fit, the oldest, the lowest address)
// is made by a total order, never by map iteration.
//
// A Pack serves one simulation and is not safe for concurrent use; the
// engine runs one process at a time, and observers are called from it.
package dmadebug
