// Package gpumem is the checker's rule pack for GPU memory. The cuda
// façade reports every use of memory a program makes through it (a CPU
// access, each end of a copy, each access of a kernel, a prefetch, an
// advice, a free, an export) as a cuda.Observation, with what the
// address resolved to: the allocation, the context and process that
// made it, the call that made it (the provenance), the call that freed
// it. CUDA has no debug layer for these; the real outcomes are a SIGSEGV
// in the program, a CUDA_ERROR_ILLEGAL_ADDRESS that kills the context,
// or silent corruption. The pack reports five classes:
//
//   - cpu-deref-device-pointer: the CPU loads or stores through a
//     device pointer. VRAM of a PCIe GPU is not mapped on the CPU:
//     unified addressing keeps the address distinct, not accessible
//     (CUDA Programming Guide, "Unified Virtual Address Space").
//   - managed-access-rule: the CPU touches managed memory while a GPU
//     without concurrent managed access (pre-Pascal, Tegra) is active,
//     from a kernel launch until the synchronisation after it, whether
//     or not the kernel still runs (the CUDA Programming Guide's rules
//     for devices without concurrentManagedAccess).
//   - use-after-free: memory freed by cuMemFree or cuMemFreeHost (or
//     with its context) is used again: by a copy, a kernel, the CPU, a
//     prefetch, an advice, an export, or a second free. The façade
//     remembers the last cuda.FreedRemembered frees; the diagnostic
//     names the allocation and the free.
//   - kernel-unpinned-host-memory: a kernel is given host memory that
//     is not pinned and mapped: pageable memory, or memory registered
//     without CU_MEMHOSTREGISTER_DEVICEMAP.
//   - foreign-context-pointer: a pointer of another process (meaningless
//     here), or, given to a kernel, memory of another context that the
//     kernel's context may not use: device memory of another context on
//     the same GPU, non-portable registered memory of another context.
//
// Each diagnostic's origin is the allocation call, with its time and
// thread. Correct use reports nothing.
//
// The pack imports only the check framework and its subject, package
// cuda. Attach hooks a Pack to a cuda.Driver's observations; New makes
// one that is fed by hand.
package gpumem
