// Package nvp2p is nvidia.ko's GPUDirect RDMA interface, nvidia_p2p,
// in Go form: what a third-party kernel driver (an RDMA NIC's
// peer-memory client, a capture card, a storage driver) calls to pin
// GPU memory and let its device read and write it over PCIe.
//
// Its real counterpart is kernel-open/nvidia/nv-p2p.h and nv-p2p.c of
// NVIDIA's open-gpu-kernel-modules, and NVIDIA's "GPUDirect RDMA"
// guide (docs.nvidia.com/cuda/gpudirect-rdma). Names map one to one:
//
//	nvidia_p2p_get_pages             Driver.GetPages
//	nvidia_p2p_put_pages             Driver.PutPages
//	nvidia_p2p_free_page_table       Driver.FreePageTable
//	nvidia_p2p_get_pages_persistent  Driver.GetPagesPersistent
//	nvidia_p2p_put_pages_persistent  Driver.PutPagesPersistent
//	nvidia_p2p_dma_map_pages         Driver.DMAMapPages
//	nvidia_p2p_dma_unmap_pages       Driver.DMAUnmapPages
//	nvidia_p2p_free_dma_mapping      Driver.FreeDMAMapping
//	struct nvidia_p2p_page_table     PageTable (Pages: BAR1 addresses)
//	struct nvidia_p2p_dma_mapping    DMAMapping
//	CU_POINTER_ATTRIBUTE_P2P_TOKENS  Driver.Tokens
//
// The rules it keeps, each tested:
//
//   - Pins are of device memory in 64 KiB GPU pages; an address or
//     length not aligned to 64 KiB is -EINVAL, as is get_pages without
//     a free callback.
//   - Each pin maps its pages through the GPU's BAR1 (gpu.Aperture):
//     the driver's reserve is never given out, overlapping pins share
//     BAR1 pages, and a pin that does not fit is -ENOMEM and maps
//     nothing.
//   - With tokens 0 only the process that owns the memory may pin it
//     (rm_p2p_get_pages looks the address up in the calling process:
//     -EINVAL otherwise); the deprecated tokens let another process's
//     driver pin it.
//   - When the application frees the memory (cuMemFree) or its process
//     exits, the driver calls each non-persistent pin's free callback
//     in the freeing thread, then unmaps the pages; the callback must
//     call FreePageTable only: PutPages from inside it would deadlock
//     (the model returns EDEADLK and reports it). put_pages of a table
//     the driver already took back is 0, as in nv-p2p.c.
//   - Persistent pins have no callback and no tokens; freeing their
//     memory is reported (OpFreedWhilePinned) and the pin stays.
//   - dma_map_pages hands a peer the BAR1 addresses. A peer behind an
//     IOMMU that translates, or below another socket's root complex, is
//     refused with -ENOTSUPP (the guide: GPUDirect RDMA wants the IOMMU
//     off or in passthrough, and across CPU sockets "may be extremely
//     performance-limited or even not work reliably": the model refuses
//     unless dma.DMA.AllowCrossSocket says the platform carries it).
//
// New registers every discrete GPU's BAR1 with the DMA layer as a peer
// window (dma.PeerMemory): a device's dma.Transfer to a BAR1 address
// lands in the VRAM page mapped there (versions, payload bytes), routed
// as peer-to-peer traffic turns: below a shared PCIe switch at the
// links' rate without touching the root complex, through a root
// complex capped at its p2p_efficiency (platform.RootComplex), across
// sockets refused unless dma.DMA.AllowCrossSocket says otherwise. A
// page that is not pinned answers nothing: the access fails and no
// byte lands.
//
// The Tegra flavour (Jetson; tegra.go) pins cudaHostAlloc memory of the
// shared DRAM in 4 KiB pages, maps it through the Linux DMA API for a
// struct device (an SMMU may translate), takes other arguments and has
// no persistent pins; on Tegra the discrete calls are -ENOTSUPP, and on
// a discrete GPU the Tegra ones.
//
// Costs are assumed (CallCost, PinCostPerPage, UnpinCostPerPage):
// neither NVIDIA nor docs/measurements records them. Every call and
// driver action is an Event through Hooks, for the checker's gpudirect
// pack.
package nvp2p
