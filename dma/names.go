package dma

import "strconv"

// String is the C name of the direction (enum dma_data_direction).
func (d Direction) String() string {
	switch d {
	case Bidirectional:
		return "DMA_BIDIRECTIONAL"
	case ToDevice:
		return "DMA_TO_DEVICE"
	case FromDevice:
		return "DMA_FROM_DEVICE"
	case None:
		return "DMA_NONE"
	}
	return "DMA_DIRECTION(" + strconv.Itoa(int(d)) + ")"
}

// valid is valid_dma_direction(): the three directions a mapping may
// have. The kernel BUG()s on any other (DMA_NONE included).
func (d Direction) valid() bool {
	return d == Bidirectional || d == ToDevice || d == FromDevice
}

func (k Kind) String() string {
	switch k {
	case KindSingle:
		return "single"
	case KindPage:
		return "page"
	case KindSG:
		return "sg"
	case KindCoherent:
		return "coherent"
	case KindResource:
		return "resource"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

func (o Op) String() string {
	switch o {
	case OpMap:
		return "map"
	case OpUnmap:
		return "unmap"
	case OpAllocCoherent:
		return "alloc_coherent"
	case OpFreeCoherent:
		return "free_coherent"
	case OpMappingError:
		return "mapping_error"
	case OpSyncForCPU:
		return "sync_for_cpu"
	case OpSyncForDevice:
		return "sync_for_device"
	case OpDeviceAccess:
		return "device_access"
	case OpUnbind:
		return "unbind"
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

func (c MemClass) String() string {
	switch c {
	case MemLinear:
		return "linear"
	case MemVmalloc:
		return "vmalloc"
	case MemStack:
		return "stack"
	case MemText:
		return "text"
	case MemInvalid:
		return "invalid"
	case MemMMIO:
		return "mmio"
	}
	return "memclass(" + strconv.Itoa(int(c)) + ")"
}
