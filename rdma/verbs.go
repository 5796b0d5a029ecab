package rdma

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Env is one host as the RDMA core needs it: the machine, its memory,
// the DMA layer and the kernel (processes, RLIMIT_MEMLOCK).
type Env struct {
	Machine *machine.Machine
	Mem     *mem.Memory
	DMA     *dma.DMA
	Kernel  *kernel.Kernel
}

// Params are the costs and limits of a device; zero fields take the
// defaults.
type Params struct {
	// PinCost and UnpinCost are pinning and unpinning one 4 KiB page of
	// user memory at ibv_reg_mr and ibv_dereg_mr (ib_umem_get's
	// pin_user_pages_fast and its accounting).
	PinCost, UnpinCost sim.Time
	// PostCost is the CPU's part of ibv_post_send or ibv_post_recv:
	// building the WQE and the doorbell's MMIO write.
	PostCost sim.Time
	// PollCost is ibv_poll_cq's CPU work per call, beyond reading the
	// CQE from memory.
	PollCost sim.Time
	// Header is the bytes every packet carries on the wire besides its
	// payload.
	Header uint64
	// MaxChunks bounds how many pieces the data path splits a message
	// into (each piece a DMA read, a wire flow and a DMA write that
	// overlap the neighbours'): more pieces fill the pipeline better and
	// cost more events.
	MaxChunks int
	// MinPiece is the smallest piece: at least what the slowest stage
	// moves during a DMA's latency, so that the pieces in flight keep
	// every link busy.
	MinPiece uint64
}

// Default costs and limits.
const (
	// DefaultPinCost and DefaultUnpinCost are those of cuMemHostRegister
	// per page (platform.DefaultPinCost, measured): ib_umem_get walks
	// and pins the user pages as the CUDA driver does, then maps them.
	DefaultPinCost   = 133500 * sim.Picosecond
	DefaultUnpinCost = 53400 * sim.Picosecond
	// DefaultPostCost is assumed: a WQE written to the send queue in
	// host memory and a 64-bit doorbell MMIO write, a few hundred
	// nanoseconds on x86 (perftest's ib_write_lat reports ~1 µs for a
	// whole 2-byte RDMA write round on ConnectX-7).
	DefaultPostCost = 200 * sim.Nanosecond
	// DefaultPollCost is assumed: ibv_poll_cq's checks around the CQE
	// read.
	DefaultPollCost = 50 * sim.Nanosecond
	// DefaultHeader is an InfiniBand RC packet's headers: LRH 8 + BTH 12
	// + ICRC 4 + VCRC 2 bytes (InfiniBand Architecture Specification
	// vol. 1, ch. 9); RETH's 16 bytes ride on the first packet only and
	// are left out.
	DefaultHeader = 26
	// DefaultMaxChunks: 64 pieces put the pipeline's fill at most 2/64
	// (3 %) of a large message's time.
	DefaultMaxChunks = 64
	// DefaultMinPiece is assumed: 64 KiB is 1.3 µs at 400 Gb/s, more
	// than a DMA's latency through a root complex and DRAM (~0.5 µs on
	// the presets), so that a piece's bytes cover the next one's
	// latency.
	DefaultMinPiece = 64 << 10
)

func (p Params) withDefaults() Params {
	if p.PinCost == 0 {
		p.PinCost = DefaultPinCost
	}
	if p.UnpinCost == 0 {
		p.UnpinCost = DefaultUnpinCost
	}
	if p.PostCost == 0 {
		p.PostCost = DefaultPostCost
	}
	if p.PollCost == 0 {
		p.PollCost = DefaultPollCost
	}
	if p.Header == 0 {
		p.Header = DefaultHeader
	}
	if p.MaxChunks <= 0 {
		p.MaxChunks = DefaultMaxChunks
	}
	if p.MinPiece == 0 {
		p.MinPiece = DefaultMinPiece
	}
	return p
}

// Device limits, as ibv_query_device reports them on ConnectX-7
// (mlx5): max_qp_wr, max_sge, max_cqe.
const (
	MaxQPWR = 32768
	MaxSGE  = 30
	MaxCQE  = 4194303
	// WQESize and CQESize are mlx5's basic send WQE and CQE sizes.
	WQESize = 64
	CQESize = 64
)

// Access is ibv_access_flags.
type Access uint32

const (
	AccessLocalWrite   Access = 1 << iota // IBV_ACCESS_LOCAL_WRITE
	AccessRemoteWrite                     // IBV_ACCESS_REMOTE_WRITE
	AccessRemoteRead                      // IBV_ACCESS_REMOTE_READ
	AccessRemoteAtomic                    // IBV_ACCESS_REMOTE_ATOMIC
)

func (a Access) String() string {
	s := ""
	for i, n := range []string{"LOCAL_WRITE", "REMOTE_WRITE", "REMOTE_READ", "REMOTE_ATOMIC"} {
		if a&(1<<i) != 0 {
			if s != "" {
				s += "|"
			}
			s += n
		}
	}
	if s == "" {
		return "0"
	}
	return s
}

// Device is an RDMA device (an HCA, ibv_context after ibv_open_device)
// bound to a platform NIC: its DMA layer device is the bus master of
// every access the HCA makes.
type Device struct {
	name string
	env  Env
	hw   *machine.Device
	dev  *dma.Device
	prm  Params
	port *port

	mrs      map[uint32]*MR // by key (lkey = rkey, as mlx5 makes them)
	qps      map[uint32]*QP // by QP number
	nextMkey uint32
	nextQPN  uint32
	peers    []*peerClient

	// Hooks receives every Event of the device, in order.
	Hooks sim.Hooks[Event]
}

// ErrNoDevice is wrapped by Open for a name that is no NIC.
var ErrNoDevice = errors.New("no such RDMA device")

// Open is ibv_open_device on the platform NIC named nic of host env.
func Open(env Env, nic string, prm Params) (*Device, error) {
	var hw *machine.Device
	for _, d := range env.Machine.Devices {
		if d.Name == nic && d.Spec.Kind == "nic" {
			hw = d
		}
	}
	if hw == nil {
		return nil, fmt.Errorf("ibv_open_device(%s) on %s: %w", nic, env.Machine.Spec.Name, ErrNoDevice)
	}
	if hw.Spec.LineRate.V <= 0 {
		return nil, fmt.Errorf("ibv_open_device(%s): the NIC has no line rate: %w", nic, ErrNoDevice)
	}
	dev, err := env.DMA.Device(nic)
	if err != nil {
		return nil, fmt.Errorf("ibv_open_device(%s): %w", nic, err)
	}
	return &Device{
		name: nic, env: env, hw: hw, dev: dev, prm: prm.withDefaults(),
		mrs: map[uint32]*MR{}, qps: map[uint32]*QP{}, nextMkey: 1, nextQPN: 0x100,
	}, nil
}

// Name is the NIC's name.
func (d *Device) Name() string { return d.name }

// DMADevice is the HCA as a bus master of the DMA layer.
func (d *Device) DMADevice() *dma.Device { return d.dev }

// LineRate is the port's rate in bytes per second.
func (d *Device) LineRate() float64 { return float64(d.hw.Spec.LineRate.V) }

// PD is a protection domain (ibv_pd).
type PD struct {
	d    *Device
	proc *kernel.Process
	// users counts the MRs and QPs made in it.
	users int
	dead  bool
}

// AllocPD is ibv_alloc_pd for process proc.
func (d *Device) AllocPD(proc *kernel.Process) (*PD, error) {
	if proc == nil || proc.Exited() {
		return nil, fmt.Errorf("ibv_alloc_pd(%s): %w", d.name, syscall.EINVAL)
	}
	return &PD{d: d, proc: proc}, nil
}

// Dealloc is ibv_dealloc_pd: EBUSY while an MR or QP uses the domain.
func (pd *PD) Dealloc() error {
	switch {
	case pd.dead:
		return fmt.Errorf("ibv_dealloc_pd: %w", syscall.EINVAL)
	case pd.users > 0:
		return fmt.Errorf("ibv_dealloc_pd: %d MR(s) and QP(s) still use it: %w", pd.users, syscall.EBUSY)
	}
	pd.dead = true
	return nil
}

// Process is the process the domain belongs to.
func (pd *PD) Process() *kernel.Process { return pd.proc }

func mem64(n uint64) mem.DMAAddr { return mem.DMAAddr(n) }
