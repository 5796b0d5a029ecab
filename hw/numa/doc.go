// Package numa measures the real machine's NUMA nodes from Go, without
// cgo and without a GPU, in the manner of Intel's Memory Latency Checker
// (mlc --latency_matrix, --bandwidth_matrix): for every pair of a CPU node
// i and a memory node j,
//
//   - the idle load latency: one thread pinned to a CPU of node i chases
//     pointers through a buffer on node j, each 64-byte line holding the
//     index of the next one in a random cyclic permutation of all the
//     buffer's lines, so that every load depends on the one before and
//     the prefetchers cannot guess it (ns per load);
//   - the read bandwidth: one thread on each allowed CPU of node i reads
//     its share of the buffer on node j sequentially (MB/s, 1 MB = 10^6 B,
//     as MLC reports);
//
// and, per node, whether first touch placed pages where the default
// policy says: a thread on node i writes each page of a fresh mapping and
// move_pages(2) in its query-only form (nodes == NULL) says which node
// each page is on.
//
// The buffer of memory node j is an anonymous mmap bound to j with
// mbind(2) MPOL_BIND before anything touches it, then first touched from a
// thread on node j, so that it lands on j by the policy and, where mbind
// is refused, by the default local policy; move_pages checks where it
// landed, and /proc/self/smaps how much of it transparent huge pages
// back (asked for with MADV_HUGEPAGE, to keep TLB misses out of the
// latency as MLC's large pages do). Threads are pinned with runtime.LockOSThread and
// sched_setaffinity(2) on that thread; a pinned goroutine never unlocks,
// so its thread exits with it and no other goroutine inherits the mask.
// The syscalls go through golang.org/x/sys/unix (mbind and move_pages as
// raw syscalls: the package wraps neither).
//
// Nodes, their CPUs, memory and SLIT distances come from
// sys/devices/system/node through hw/topo (a copied tree for tests). A
// refused syscall (EPERM, ENOSYS, EINVAL from a cpuset) is not a failure:
// the probe measures what it can and says in Report.Notes what it could
// not do and why. A one-node machine gives one row and one column.
//
// Kernel sources: mm/mempolicy.c (mbind, MPOL_BIND), mm/migrate.c
// (move_pages, do_pages_stat), kernel/sched/core.c (sched_setaffinity).
package numa
