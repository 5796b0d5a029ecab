// Package numa is a libnuma-shaped façade (numa(3), numactl's library)
// over the kernel's NUMA placement: a Lib is libnuma in one thread of one
// process, and each call is the system calls libnuma makes
// (set_mempolicy, mbind, sched_setaffinity, move_pages) on the model's
// kernel.
//
// numa_alloc_onnode, numa_alloc_interleaved and numa_alloc_local map
// anonymous memory (kernel.Process.MmapAnon) and mbind it, so that
// pages are placed at first touch by that policy, whoever touches them;
// numa_alloc uses the process's policy. numa_tonode_memory and
// numa_interleave_memory mbind an existing range without moving what is
// already placed. numa_run_on_node binds the thread (and the process's
// node) to a node's CPUs; numa_set_preferred, numa_set_localalloc,
// numa_set_interleave_mask and numa_set_membind set the process's
// policy. numa_set_bind_policy chooses between MPOL_BIND (strict, the
// default: a full node fails the allocation) and MPOL_PREFERRED for the
// calls that bind to a node, as libnuma's does.
//
// Sizes are rounded up to pages; errors wrap the system call's errno.
package numa
