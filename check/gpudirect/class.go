package gpudirect

import "github.com/dmalab/dmalab/check"

// GPUDirect RDMA class codes. They never change.
const (
	PutPagesInCallback = "gpudirect-put-pages-in-callback"
	CallbackBlocks     = "gpudirect-callback-blocks"
	PinUnaligned       = "gpudirect-pin-unaligned"
	BAR1Exhausted      = "gpudirect-bar1-exhausted"
	TokenNotOwner      = "gpudirect-token-not-owner"
	ReadBeforeVisible  = "gpudirect-read-before-visible"
	WriteDuringKernel  = "gpudirect-write-during-kernel"
	IOMMUTranslating   = "gpudirect-iommu-translating"
	PinLeak            = "gpudirect-pin-leak"
)

// cls indexes classes.
type cls uint8

const (
	cPutInCallback cls = iota
	cBlocks
	cUnaligned
	cBAR1
	cToken
	cBeforeVisible
	cDuringKernel
	cIOMMU
	cLeak
	nClasses
)

// guide is the rules' source: NVIDIA's GPUDirect RDMA guide
// (docs.nvidia.com/cuda/gpudirect-rdma) and nv-p2p.h.
const guide = "NVIDIA GPUDirect RDMA guide: "

// infos is indexed by cls.
var infos = [nClasses]check.ClassInfo{
	cPutInCallback: {Code: PutPagesInCallback, Severity: check.Error,
		Summary: "nvidia_p2p_put_pages called from inside the page table's free callback: the freeing thread holds the lock put_pages takes (a deadlock; the callback must call nvidia_p2p_free_page_table only)",
		Source:  guide + "Unpin Callback; kernel-open/nvidia/nv-p2p.h"},
	cBlocks: {Code: CallbackBlocks, Severity: check.Error,
		Summary: "a free callback that never returned (it waits on something the thread freeing the memory holds: a deadlock) or held that thread past CallbackBlockLimit (it may block only briefly)",
		Source:  guide + "Unpin Callback"},
	cUnaligned: {Code: PinUnaligned, Severity: check.Error,
		Summary: "nvidia_p2p_get_pages of an address or length not aligned to the 64 KiB GPU page (-EINVAL)",
		Source:  guide + "Pinning GPU memory; kernel-open/nvidia/nv-p2p.c"},
	cBAR1: {Code: BAR1Exhausted, Severity: check.Error,
		Summary: "nvidia_p2p_get_pages refused with -ENOMEM: the GPU's BAR1 aperture has no room left for the pin",
		Source:  guide + "PCI BAR sizes; kernel-open/nvidia/nv-p2p.c"},
	cToken: {Code: TokenNotOwner, Severity: check.Error,
		Summary: "nvidia_p2p_get_pages with tokens 0 from a process that does not own the memory (-EINVAL: only the owning process may pin without tokens)",
		Source:  guide + "Tokens Usage; kernel-open/nvidia/nv-p2p.h"},
	cBeforeVisible: {Code: ReadBeforeVisible, Severity: check.Error,
		Summary: "a peer read of pinned GPU memory after a synchronous cuMemcpy into it returned but before its writes were visible (the buffer lacks CU_POINTER_ATTRIBUTE_SYNC_MEMOPS): the reader gets the old bytes, proved by versions",
		Source:  guide + "Synchronization and Memory Ordering"},
	cDuringKernel: {Code: WriteDuringKernel, Severity: check.Error,
		Summary: "a peer write into GPU memory while a kernel that uses that memory runs: only CUDA synchronisation orders GPUDirect RDMA writes against a kernel",
		Source:  guide + "Synchronization and Memory Ordering"},
	cIOMMU: {Code: IOMMUTranslating, Severity: check.Error,
		Summary: "GPUDirect RDMA for a peer behind a translating IOMMU (nvidia_p2p_dma_map_pages refused with -ENOTSUPP): the guide wants the IOMMU off or in passthrough",
		Source:  guide + "Supported Systems (IOMMUs)"},
	cLeak: {Code: PinLeak, Severity: check.Error,
		Summary: "a pin never released: memory under a persistent pin freed (by cuMemFree or its process's exit), or a pin still held at the end of the run",
		Source:  guide + "Unpinning GPU memory; kernel-open/nvidia/nv-p2p.h"},
}

// classes are the registered handles, indexed by cls. GPUDirect ranks
// after DMA-BUF (400).
var classes = check.Register("gpudirect", 500, infos[:]...)

// Classes lists the pack's classes, in the order `dmalab check
// --classes` prints them.
func Classes() []check.ClassInfo { return check.Infos(classes[:]) }
