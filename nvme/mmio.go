package nvme

import (
	"fmt"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Register access. A write is posted: the CPU pays Options.MMIOWrite
// and goes on; the controller sees the value one way later. A read is
// non-posted: the request travels one way, the controller answers with
// the register as it is then, and the completion travels back, the
// core stalled all along (readl's cost).

// ReadReg reads a register of BAR0. 64-bit registers (CAP, ASQ, ACQ)
// take 8-byte reads, or 4-byte reads of either half (lo_hi_readq);
// the others 4-byte reads.
func (c *Controller) ReadReg(t *sim.Proc, off uint64, size int) (uint64, error) {
	if err := c.checkAccess(off, size, "read"); err != nil {
		return 0, err
	}
	t.Sleep(c.oneWay)
	v := c.readNow(off, size)
	t.Sleep(c.oneWay)
	return v, nil
}

// WriteReg writes a register of BAR0 (posted).
func (c *Controller) WriteReg(t *sim.Proc, off uint64, size int, v uint64) error {
	if err := c.checkAccess(off, size, "write"); err != nil {
		return err
	}
	if off == RegCAP || off == RegCAP+4 || off == RegVS || off == RegCSTS {
		return fmt.Errorf("nvme %s: write of %d bytes at %#x: read-only register", c.name, size, off)
	}
	c.m.Engine.After(c.oneWay, func() { c.writeNow(off, size, v) })
	t.Sleep(c.opt.MMIOWrite)
	return nil
}

// checkAccess refuses an offset that is no register, or a width the
// register does not take.
func (c *Controller) checkAccess(off uint64, size int, op string) error {
	bad := func(why string) error {
		return fmt.Errorf("nvme %s: %s of %d bytes at %#x: %s", c.name, op, size, off, why)
	}
	switch {
	case off >= BAR0Size:
		return bad(fmt.Sprintf("beyond BAR0 (%#x bytes)", BAR0Size))
	case off >= RegDoorbells:
		stride := uint64(4) << c.opt.DoorbellStride
		if (off-RegDoorbells)%stride != 0 {
			return bad("not a doorbell")
		}
		if size != 4 {
			return bad("doorbells take 4-byte accesses")
		}
		return nil
	}
	switch off {
	case RegCAP, RegASQ, RegACQ:
		if size != 4 && size != 8 {
			return bad("64-bit registers take 4- or 8-byte accesses")
		}
	case RegCAP + 4, RegASQ + 4, RegACQ + 4, RegVS, RegINTMS, RegINTMC, RegCC, RegCSTS, RegAQA:
		if size != 4 {
			return bad("32-bit access only")
		}
	default:
		return bad("no register there")
	}
	return nil
}

func (c *Controller) readNow(off uint64, size int) uint64 {
	var v uint64
	switch off &^ 7 {
	case RegCAP:
		v = c.capReg()
	case RegASQ:
		v = c.asq
	case RegACQ:
		v = c.acq
	}
	switch off {
	case RegCAP, RegASQ, RegACQ:
		if size == 4 {
			v &= 0xffff_ffff
		}
		return v
	case RegCAP + 4, RegASQ + 4, RegACQ + 4:
		return v >> 32
	case RegVS:
		return Version
	case RegINTMS, RegINTMC:
		return uint64(c.intms)
	case RegCC:
		return uint64(c.cc)
	case RegCSTS:
		return uint64(c.csts)
	case RegAQA:
		return uint64(c.aqa)
	}
	return 0 // doorbells read as zero (their value is undefined)
}

// set64 stores v into *r as a whole, or into its low or high half.
func set64(r *uint64, off, base uint64, size int, v uint64) {
	switch {
	case size == 8:
		*r = v
	case off == base:
		*r = *r&^0xffff_ffff | v&0xffff_ffff
	default:
		*r = *r&0xffff_ffff | v<<32
	}
}

func (c *Controller) writeNow(off uint64, size int, v uint64) {
	if off >= RegDoorbells {
		c.doorbell(off, uint32(v))
		return
	}
	switch off &^ 7 {
	case RegASQ:
		set64(&c.asq, off, RegASQ, size, v)
		return
	case RegACQ:
		set64(&c.acq, off, RegACQ, size, v)
		return
	}
	switch off {
	case RegINTMS:
		c.intms |= uint32(v)
	case RegINTMC:
		c.intms &^= uint32(v)
	case RegAQA:
		c.aqa = uint32(v) & 0x0fff_0fff
	case RegCC:
		c.writeCC(uint32(v) & ccWritableMask)
	}
}

// writeCC acts on CC's transitions: EN 0→1 brings the controller up,
// EN 1→0 resets it, a shutdown notification shuts it down.
func (c *Controller) writeCC(v uint32) {
	old := c.cc
	c.cc = v
	switch {
	case old&CCEnable == 0 && v&CCEnable != 0:
		c.enable()
	case old&CCEnable != 0 && v&CCEnable == 0:
		// Controller reset (NVMe Base 2.0, 3.7.2): queues and commands
		// are dropped; RDY clears once the DMA in flight has landed
		// and ReadyTime has passed.
		c.dropQueues()
		c.whenDrained(func() {
			c.after(c.opt.ReadyTime, func() { c.csts = 0 })
		})
	case old&CCSHNMask == 0 && v&CCSHNMask != 0 && v&CCEnable != 0:
		c.csts = c.csts&^CSTSShstMask | CSTSShstActive
		c.after(c.opt.ReadyTime, func() { c.csts = c.csts&^CSTSShstMask | CSTSShstDone })
	}
}

// enable brings the controller up after ReadyTime with the admin
// queues AQA, ASQ and ACQ describe; a configuration it cannot run
// (no admin queue, a page size outside CAP.MPSMIN..MPSMAX) sets
// CSTS.CFS instead of RDY.
func (c *Controller) enable() {
	cc, aqa, asq, acq := c.cc, c.aqa, c.asq, c.acq
	c.after(c.opt.ReadyTime, func() {
		mps := cc >> CCMPSShift & 0xf
		sqs, cqs := int(aqa&0xfff)+1, int(aqa>>16&0xfff)+1
		page := uint64(1) << (12 + mps)
		if mps > maxMPS || sqs < 2 || cqs < 2 || asq == 0 || acq == 0 || asq%mem.PageSize != 0 || acq%mem.PageSize != 0 {
			c.csts |= CSTSFatal
			return
		}
		c.page = page
		c.cqs[0] = &compQueue{id: 0, base: mem.DMAAddr(acq), size: cqs, phase: true, ien: true, iv: 0}
		c.addSQ(&subQueue{id: 0, base: mem.DMAAddr(asq), size: sqs, cqid: 0})
		c.csts |= CSTSReady
	})
}
