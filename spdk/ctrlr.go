package spdk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/nvme"
	"github.com/dmalab/dmalab/sim"
)

// Regs is the controller's BAR0 as the driver reaches it: a VFIO mmap
// of region 0, or the function's pci.Registers. The implementation
// charges each access's cost to the calling thread.
type Regs interface {
	ReadReg(t *sim.Proc, off uint64, size int) (uint64, error)
	WriteReg(t *sim.Proc, off uint64, size int, v uint64) error
}

// Errors of the driver.
var (
	// ErrTimeout: the controller did not answer in time (CSTS.RDY
	// within CAP.TO, an admin command within Options.AdminTimeout).
	ErrTimeout = errors.New("spdk: controller timed out")
	// ErrFatal: the controller set CSTS.CFS.
	ErrFatal = errors.New("spdk: controller fatal status")
	// ErrCommand: a command completed with an error status.
	ErrCommand = errors.New("spdk: command failed")
	// ErrQueueFull: every entry of the queue pair is outstanding
	// (SPDK queues the request; the model leaves that to the caller).
	ErrQueueFull = errors.New("spdk: queue pair full")
)

// Options tune the driver; the zero value is SPDK's defaults.
type Options struct {
	// AdminEntries is the admin queue's size (NVME_ADMIN_ENTRIES, 128 in
	// lib/nvme/nvme_internal.h), capped by CAP.MQES.
	AdminEntries int
	// PollInterval spaces the reads of a register or a completion entry
	// while the driver waits synchronously (default 1 µs; SPDK spins,
	// which in virtual time is a read per interval).
	PollInterval sim.Time
	// AdminTimeout bounds an admin command (default 1 s).
	AdminTimeout sim.Time
	// IOQueues is the number of I/O queue pairs requested with Set
	// Features (default 1).
	IOQueues int
}

func (o Options) withDefaults() Options {
	if o.AdminEntries <= 0 {
		o.AdminEntries = 128
	}
	if o.PollInterval <= 0 {
		o.PollInterval = sim.Microsecond
	}
	if o.AdminTimeout <= 0 {
		o.AdminTimeout = sim.Second
	}
	if o.IOQueues <= 0 {
		o.IOQueues = 1
	}
	return o
}

// Ctrlr is a controller the driver has brought up (struct
// spdk_nvme_ctrlr): its capabilities, its admin queue pair, and what
// Identify said.
type Ctrlr struct {
	regs  Regs
	m     *Memory
	opt   Options
	cap   uint64
	dstrd uint8
	page  uint64
	admin *QPair
	ident Buf

	model    string
	maxXfer  uint64
	blocks   uint64
	lbaSize  uint64
	ioQueues int
	nextQID  uint16
}

// Probe brings the controller up as nvme_ctrlr_process_init does:
// disable it if enabled (waiting for CSTS.RDY to clear), program the
// admin queue (AQA, ASQ, ACQ) in m, enable it, wait for CSTS.RDY within
// CAP.TO, then Identify the controller and namespace 1 and ask for
// opt.IOQueues queue pairs.
func Probe(p *sim.Proc, regs Regs, m *Memory, opt Options) (*Ctrlr, error) {
	opt = opt.withDefaults()
	c := &Ctrlr{regs: regs, m: m, opt: opt, page: mem.PageSize, nextQID: 1}
	var err error
	if c.cap, err = regs.ReadReg(p, nvme.RegCAP, 8); err != nil {
		return nil, fmt.Errorf("spdk: probe: read CAP: %w", err)
	}
	c.dstrd = uint8(c.cap >> nvme.CapDSTRDShift & 0xf)
	if min := uint64(1) << (12 + c.cap>>nvme.CapMPSMINShift&0xf); min > c.page {
		return nil, fmt.Errorf("spdk: probe: controller's minimum page %d above the host's %d: %w", min, c.page, mem.ErrInvalid)
	}
	cc, err := regs.ReadReg(p, nvme.RegCC, 4)
	if err != nil {
		return nil, fmt.Errorf("spdk: probe: read CC: %w", err)
	}
	if cc&nvme.CCEnable != 0 {
		if err := regs.WriteReg(p, nvme.RegCC, 4, cc&^nvme.CCEnable); err != nil {
			return nil, fmt.Errorf("spdk: probe: disable: %w", err)
		}
		if err := c.waitReady(p, false); err != nil {
			return nil, fmt.Errorf("spdk: probe: disable: %w", err)
		}
	}
	n := min(opt.AdminEntries, int(c.cap&nvme.CapMQESMask)+1)
	if c.admin, err = c.newQPair(p, 0, n); err != nil {
		return nil, fmt.Errorf("spdk: probe: admin queue: %w", err)
	}
	for _, w := range []struct {
		off  uint64
		size int
		v    uint64
	}{
		{nvme.RegAQA, 4, uint64(n-1) | uint64(n-1)<<16},
		{nvme.RegASQ, 8, uint64(c.admin.sq.IOVA)},
		{nvme.RegACQ, 8, uint64(c.admin.cq.IOVA)},
		{nvme.RegCC, 4, nvme.CCEnable | nvme.CCIOSQES64 | nvme.CCIOCQES16},
	} {
		if err := regs.WriteReg(p, w.off, w.size, w.v); err != nil {
			return nil, fmt.Errorf("spdk: probe: enable: %w", err)
		}
	}
	if err := c.waitReady(p, true); err != nil {
		return nil, fmt.Errorf("spdk: probe: enable: %w", err)
	}
	if c.ident, err = m.Alloc(nvme.IdentifyDataBytes, c.page); err != nil {
		return nil, fmt.Errorf("spdk: probe: identify buffer: %w", err)
	}
	if err := c.identify(p); err != nil {
		return nil, fmt.Errorf("spdk: probe: %w", err)
	}
	return c, nil
}

// waitReady polls CSTS until RDY is ready, for at most CAP.TO.
func (c *Ctrlr) waitReady(p *sim.Proc, ready bool) error {
	deadline := p.Now() + sim.Time(c.cap>>nvme.CapTOShift&0xff)*500*sim.Millisecond
	for {
		csts, err := c.regs.ReadReg(p, nvme.RegCSTS, 4)
		if err != nil {
			return fmt.Errorf("read CSTS: %w", err)
		}
		if csts&nvme.CSTSFatal != 0 {
			return fmt.Errorf("CSTS %#x: %w", csts, ErrFatal)
		}
		if (csts&nvme.CSTSReady != 0) == ready {
			return nil
		}
		if p.Now() >= deadline {
			return fmt.Errorf("CSTS.RDY not %v within CAP.TO: %w", ready, ErrTimeout)
		}
		p.Sleep(c.opt.PollInterval * 100)
	}
}

func (c *Ctrlr) identify(p *sim.Proc) error {
	data := make([]byte, nvme.IdentifyDataBytes)
	if _, err := c.AdminSync(p, nvme.Command{Opcode: nvme.AdminIdentify, PRP1: uint64(c.ident.IOVA), CDW10: nvme.CNSController}); err != nil {
		return fmt.Errorf("identify controller: %w", err)
	}
	c.m.read(p, c.ident.VA, data)
	c.model = strings.TrimSpace(string(data[24:64]))
	if mdts := data[77]; mdts != 0 {
		c.maxXfer = uint64(1) << (12 + uint64(c.cap>>nvme.CapMPSMINShift&0xf) + uint64(mdts))
	}
	if _, err := c.AdminSync(p, nvme.Command{Opcode: nvme.AdminIdentify, NSID: 1, PRP1: uint64(c.ident.IOVA), CDW10: nvme.CNSNamespace}); err != nil {
		return fmt.Errorf("identify namespace 1: %w", err)
	}
	c.m.read(p, c.ident.VA, data)
	c.blocks = binary.LittleEndian.Uint64(data[0:])
	c.lbaSize = uint64(1) << data[128+4*uint64(data[26]&0xf)+2]
	want := uint32(c.opt.IOQueues-1) | uint32(c.opt.IOQueues-1)<<16
	e, err := c.AdminSync(p, nvme.Command{Opcode: nvme.AdminSetFeatures, CDW10: nvme.FeatureNumQueues, CDW11: want})
	if err != nil {
		return fmt.Errorf("set features, number of queues: %w", err)
	}
	c.ioQueues = int(min(e.DW0&0xffff, e.DW0>>16)) + 1
	return nil
}

// Model is Identify's model number.
func (c *Ctrlr) Model() string { return c.model }

// Blocks and BlockSize are namespace 1's size in blocks and its block
// size in bytes.
func (c *Ctrlr) Blocks() uint64    { return c.blocks }
func (c *Ctrlr) BlockSize() uint64 { return c.lbaSize }

// MaxTransfer is the largest transfer a command may move (MDTS), zero
// for no limit.
func (c *Ctrlr) MaxTransfer() uint64 { return c.maxXfer }

// IOQueues is the number of I/O queue pairs the controller granted.
func (c *Ctrlr) IOQueues() int { return c.ioQueues }

// Admin is the admin queue pair.
func (c *Ctrlr) Admin() *QPair { return c.admin }

// AdminSync submits cmd on the admin queue and polls for its
// completion (nvme_wait_for_completion_timeout); an error status is
// ErrCommand with the status named.
func (c *Ctrlr) AdminSync(p *sim.Proc, cmd nvme.Command) (nvme.Completion, error) {
	var done *nvme.Completion
	if err := c.admin.submit(p, cmd, Buf{}, func(e nvme.Completion) { done = &e }); err != nil {
		return nvme.Completion{}, err
	}
	deadline := p.Now() + c.opt.AdminTimeout
	for done == nil {
		if c.admin.Process(p, 0) == 0 {
			if p.Now() >= deadline {
				return nvme.Completion{}, fmt.Errorf("admin opcode %#02x: %w", cmd.Opcode, ErrTimeout)
			}
			p.Sleep(c.opt.PollInterval)
		}
	}
	if !done.Status.OK() {
		return *done, fmt.Errorf("admin opcode %#02x: %v: %w", cmd.Opcode, done.Status, ErrCommand)
	}
	return *done, nil
}

// AllocIOQPair creates an I/O queue pair of entries entries
// (spdk_nvme_ctrlr_alloc_io_qpair): Create I/O Completion Queue with
// interrupts on MSI-X vector vector (or none, polled, when vector < 0),
// then Create I/O Submission Queue bound to it.
func (c *Ctrlr) AllocIOQPair(p *sim.Proc, entries, vector int) (*QPair, error) {
	if int(c.nextQID) > c.ioQueues {
		return nil, fmt.Errorf("spdk: alloc I/O qpair: the controller granted %d: %w", c.ioQueues, ErrNoMemory)
	}
	if entries < 2 || entries > int(c.cap&nvme.CapMQESMask)+1 {
		return nil, fmt.Errorf("spdk: alloc I/O qpair of %d entries (CAP.MQES allows %d): %w", entries, c.cap&nvme.CapMQESMask+1, mem.ErrInvalid)
	}
	qid := c.nextQID
	q, err := c.newQPair(p, qid, entries)
	if err != nil {
		return nil, fmt.Errorf("spdk: alloc I/O qpair %d: %w", qid, err)
	}
	flags := uint32(1) // physically contiguous
	if vector >= 0 {
		flags |= 2 | uint32(vector)<<16
	}
	if _, err := c.AdminSync(p, nvme.Command{Opcode: nvme.AdminCreateCQ, PRP1: uint64(q.cq.IOVA), CDW10: uint32(qid) | uint32(entries-1)<<16, CDW11: flags}); err != nil {
		return nil, fmt.Errorf("spdk: create I/O CQ %d: %w", qid, err)
	}
	if _, err := c.AdminSync(p, nvme.Command{Opcode: nvme.AdminCreateSQ, PRP1: uint64(q.sq.IOVA), CDW10: uint32(qid) | uint32(entries-1)<<16, CDW11: 1 | uint32(qid)<<16}); err != nil {
		return nil, fmt.Errorf("spdk: create I/O SQ %d: %w", qid, err)
	}
	c.nextQID++
	return q, nil
}

// Shutdown is a normal shutdown (CC.SHN = 01b, then CSTS.SHST until
// complete), as spdk_nvme_detach does.
func (c *Ctrlr) Shutdown(p *sim.Proc) error {
	cc, err := c.regs.ReadReg(p, nvme.RegCC, 4)
	if err != nil {
		return fmt.Errorf("spdk: shutdown: %w", err)
	}
	if err := c.regs.WriteReg(p, nvme.RegCC, 4, cc&^nvme.CCSHNMask|nvme.CCSHNNormal); err != nil {
		return fmt.Errorf("spdk: shutdown: %w", err)
	}
	deadline := p.Now() + sim.Time(c.cap>>nvme.CapTOShift&0xff)*500*sim.Millisecond
	for {
		csts, err := c.regs.ReadReg(p, nvme.RegCSTS, 4)
		if err != nil {
			return fmt.Errorf("spdk: shutdown: %w", err)
		}
		if csts&nvme.CSTSShstMask == nvme.CSTSShstDone {
			return nil
		}
		if p.Now() >= deadline {
			return fmt.Errorf("spdk: shutdown: %w", ErrTimeout)
		}
		p.Sleep(c.opt.PollInterval * 100)
	}
}
