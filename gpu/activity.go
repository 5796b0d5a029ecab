package gpu

import (
	"fmt"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// ActivityKind says what an Activity records; the kinds follow CUPTI's
// activity records (CUPTI_ACTIVITY_KIND_MEMCPY, _KERNEL, _MEMORY2, ...).
type ActivityKind uint8

const (
	ActivityMemcpy ActivityKind = iota + 1
	ActivityKernel
	// ActivityEventRecord is cuEventRecord's marker reaching the GPU.
	ActivityEventRecord
	// ActivityWaitEvent is cuStreamWaitEvent's wait, ended.
	ActivityWaitEvent
	// ActivityHostFunc is a cuLaunchHostFunc callback.
	ActivityHostFunc
	ActivityAlloc
	ActivityFree
	ActivityBARMap
	ActivityBARUnmap
)

func (k ActivityKind) String() string {
	switch k {
	case ActivityMemcpy:
		return "memcpy"
	case ActivityKernel:
		return "kernel"
	case ActivityEventRecord:
		return "event-record"
	case ActivityWaitEvent:
		return "wait-event"
	case ActivityHostFunc:
		return "host-func"
	case ActivityAlloc:
		return "alloc"
	case ActivityFree:
		return "free"
	case ActivityBARMap:
		return "bar1-map"
	case ActivityBARUnmap:
		return "bar1-unmap"
	}
	return fmt.Sprintf("ActivityKind(%d)", int(k))
}

// Activity is one thing the GPU model did, reported to observers when
// it ends (the tracer draws stream work on a track per stream): CUPTI's
// activity record in the model.
type Activity struct {
	// Header's Time is when it was reported (its End), its Component
	// "gpu", its Cause the kind of work (a copy or kernel moves bytes:
	// sim.CauseTransfer; the rest are calls).
	sim.Header
	Kind ActivityKind
	Name string
	// Device is the GPU; -1 for managed memory. Stream is the stream's
	// ID on it (0: the default stream), -1 for what is not stream work.
	Device, Stream int
	// Queued is when the host enqueued stream work; Start when the GPU
	// began it (its stream and dependencies allowing), End when it
	// finished. Calls outside streams have Start == End, the call's time.
	Queued, Start, End sim.Time
	// Addr and Size are the allocation or mapping; for a copy, the
	// destination and the bytes, and Src the source.
	Addr     mem.GPUAddr
	Size     uint64
	Src      mem.GPUAddr
	BufferID uint64
	// Copy and Engine are a copy's direction and copy engine.
	Copy   CopyKind
	Engine string
}

func (a Activity) String() string {
	s := fmt.Sprintf("%v..%v %s %s", a.Start, a.End, a.Kind, a.Name)
	if a.Stream >= 0 {
		s += fmt.Sprintf(" gpu%d/stream%d", a.Device, a.Stream)
	}
	return s
}
