package v4l2

import (
	"fmt"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Env is what the video drivers use of a system: the machine (routes),
// memory, the DMA layer (each device's struct device), the kernel
// (processes and their files) and the DMA-BUF layer (imports, exports,
// fences).
type Env struct {
	Machine *machine.Machine
	Mem     *mem.Memory
	DMA     *dma.DMA
	Kernel  *kernel.Kernel
	Bufs    *dmabuf.Layer
}

// Layer is the V4L2 core of a system (drivers/media/v4l2-core): it
// numbers the video device nodes the drivers register and delivers
// every driver's events on Hooks.
type Layer struct {
	env   Env
	Hooks sim.Hooks[Event]
	minor int
}

// New returns the V4L2 core over env.
func New(env Env) *Layer { return &Layer{env: env} }

// Op is what an event reports.
type Op uint8

const (
	OpOpen      Op = iota + 1 // open(2) of a video node
	OpClose                   // the file's release
	OpSFmt                    // VIDIOC_S_FMT
	OpReqBufs                 // VIDIOC_REQBUFS
	OpMmap                    // mmap(2) of an MMAP buffer
	OpQBuf                    // VIDIOC_QBUF
	OpDQBuf                   // VIDIOC_DQBUF
	OpStreamOn                // VIDIOC_STREAMON
	OpStreamOff               // VIDIOC_STREAMOFF
	OpExpBuf                  // VIDIOC_EXPBUF
	OpFrame                   // the hardware finished writing a frame
	OpDrop                    // a frame came with no buffer queued
	OpJob                     // a mem2mem job finished
)

var opNames = [...]string{"", "open", "close", "s_fmt", "reqbufs", "mmap", "qbuf", "dqbuf", "streamon", "streamoff", "expbuf", "frame", "drop", "job"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "op?"
}

// Event is one V4L2 call or hardware event, delivered through
// Layer.Hooks with component "v4l2".
type Event struct {
	sim.Header
	Op Op
	// Device is the hardware's name (vi0), Node its device node
	// (/dev/video0); Process the calling process.
	Device, Node, Process string
	Type                  BufType
	Memory                Memory
	Index                 int
	// Count is REQBUFS's count granted.
	Count int
	// Sequence and Times describe a frame (frame, drop, job, dqbuf).
	Sequence uint32
	Times    FrameTimes
	// Bytes is what a frame or job wrote.
	Bytes uint64
	// Addr is the first DMA address of the buffer written.
	Addr mem.DMAAddr
	// Failed says the call failed; Err says why.
	Failed bool
	Err    string
}

func (l *Layer) emit(p *sim.Proc, e Event) {
	if !l.Hooks.Active() {
		return
	}
	e.Time, e.Component = l.env.Machine.Engine.Now(), "v4l2"
	if p != nil {
		e.Proc = p.Name()
	}
	if e.Cause == 0 {
		e.Cause = sim.CauseCall
	}
	l.Hooks.Emit(&e)
}

func (e Event) fail(err error) Event {
	if err != nil {
		e.Failed, e.Err = true, err.Error()
	}
	return e
}

// hw finds the machine's device and its DMA API view.
func (l *Layer) hw(name, kind string) (*machine.Device, *dma.Device, error) {
	var hw *machine.Device
	for _, d := range l.env.Machine.Devices {
		if d.Name == name {
			hw = d
		}
	}
	if hw == nil {
		return nil, nil, fmt.Errorf("no device %q on the platform: %w", name, ErrNoDevice)
	}
	if hw.Spec.Kind != kind {
		return nil, nil, fmt.Errorf("device %s is of kind %q, not %q: %w", name, hw.Spec.Kind, kind, ErrNoDevice)
	}
	dev, err := l.env.DMA.Device(name)
	if err != nil {
		return nil, nil, err
	}
	return hw, dev, nil
}
