// Package kernel is the operating system's side of a modelled machine:
// processes (Linux's task_struct, with its pid, NUMA placement and CPU
// affinity, its memory policy and its mm_struct), their file descriptor
// tables (files_struct) holding open files (struct file) of any kind —
// a DMA-BUF, a VFIO group or device, a device node —, descriptors passed
// between processes the way SCM_RIGHTS does (include/net/scm.h,
// net/core/scm.c: the receiver gets a new descriptor for the same open
// file), and process exit (do_exit → exit_files, exit_mm) that drops
// every descriptor, releases each file whose last reference that was, and
// runs the callbacks drivers registered for the process's end (the
// GPUDirect free callback, an mmu_notifier's release).
//
// A process's threads are sim.Procs; Process.Spawn starts one. The
// package knows nothing of devices: a File is an interface its owners
// implement (include/linux/fs.h's file_operations, reduced to release),
// and an OpenFile is its struct file, which an exporter may keep (as
// struct dma_buf keeps ->file) to read its count or to hold a reference
// no descriptor holds (Get and Put: get_file and fput). Drivers keep
// per-process state beside a Process and reclaim it in an OnExit
// callback (package cuda destroys the process's CUDA contexts there).
//
// A process has RLIMIT_MEMLOCK (DefaultMemlockLimit, 8 MiB as
// include/uapi/linux/resource.h's MLOCK_LIMIT since Linux 5.16) and its
// locked_vm: drivers that pin user memory (VFIO, iommufd) count it with
// AccountLockedVM, which refuses with ENOMEM past the limit
// (account_locked_vm, mm/util.c). An EventFD is fs/eventfd.c's counter:
// writes and a driver's Signal (eventfd_signal, from interrupt context)
// add to it, a read returns and zeroes it, blocking the thread while it
// is zero and charging the wake-up (EventFDWakeup) when it was.
//
// NUMA placement (policy.go, numa.go, anon.go; mm/mempolicy.c). Given
// the machine's memory (SetMemory), a process maps anonymous memory
// (MmapAnon) whose pages are placed at first touch, by the CPU node of
// the touching thread (ThreadNode: SetThreadAffinity binds a thread to
// CPUs, numbered node by node from platform Node.Cores) and by policy:
// the range's (Mbind: the VMA policy) or else the process's
// (SetMemPolicy, SetMemPolicyFlags): default/local, preferred,
// preferred-many, bind, interleave (page i of a mapping on the (i mod
// n)-th node, as interleave_nid with vm_pgoff) and weighted interleave
// (SetInterleaveWeight, /sys/kernel/mm/mempolicy/weighted_interleave),
// with MPOL_F_STATIC_NODES / MPOL_F_RELATIVE_NODES and a cpuset
// (SetCpuset: mems intersect or remap a policy's nodes as
// mpol_set_nodemask and mpol_rebind_nodemask do). A full node falls back
// along node_zonelist (nearest by SLIT distance, ties by node number);
// bind never leaves its nodes, and a page no allowed node can hold fails
// the access with ENOMEM (Linux would OOM-kill). Mbind with
// MPOL_MF_MOVE migrates the pages outside its nodes (MPOL_MF_STRICT:
// EIO for those left), MovePages (move_pages, query-only with nil
// nodes), MigratePages and GetMemPolicy complete the system calls.
// Populate is get_user_pages before a pin (cuMemHostRegister, VFIO's
// MAP_DMA, ibv_reg_mr): it places the untouched pages for the pinning
// thread, which pays each fault (DefaultFaultEntry plus clearing the
// page), as does a thread whose access faults. PinPages then pins them:
// no migration path moves a pinned page (move_pages -EBUSY, mbind
// MPOL_MF_STRICT EIO, migrate_pages counts it left, AutoNUMA fails it;
// each counted in pgmigrate_fail) until the driver releases the pin.
// AllocNodes is the order in which a driver's own page
// allocation for a thread tries the nodes (alloc_pages with the task's
// policy; interleave rotates per call), what cuMemHostAlloc's pages
// follow; those pages are not counted in numastat. Every
// placement is counted in numastat (NUMAStat: numa_hit, numa_miss,
// numa_foreign, interleave_hit, local_node, other_node, as
// zone_statistics in mm/page_alloc.c). What a remote access costs is
// mem's and machine's business, not the kernel's. SetLauncher gives
// every process created after it a memory policy and CPUs, as a program
// started by numactl(8) inherits what numactl set in itself (fork's
// mpol_dup and cpus_mask); the program may change both afterwards.
//
// Automatic NUMA balancing (autonuma.go; kernel/sched/fair.c,
// mm/memory.c do_numa_page, mm/migrate.c): with SetNUMABalancing on (the
// boot does it for a platform's numa_balancing=1), each process's
// scanner marks its anonymous pages PROT_NONE scan size at a time
// (mem.MarkHint), a thread's access to one takes a NUMA hinting fault,
// and the fault migrates the page to the thread's node when
// should_numa_migrate_memory agrees; the scan period adapts to the
// faults, and VMStat counts them as /proc/vmstat does.
//
// Invariants: a descriptor refers to one open file; an open file counts
// its references (f_count: descriptors in every process and Gets) and
// is released exactly once, when the last is dropped, by the thread
// that dropped it, and takes no reference after; an exited process has
// no descriptors and refuses new ones. Processes are never reaped (an
// exited one stays listed, as a zombie, so that messages can name it).
package kernel
