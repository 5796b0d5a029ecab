package nvme

import (
	"encoding/binary"
	"math/bits"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/mem"
)

// execute runs a fetched command: admin commands on queue 0, NVM
// commands on the others.
func (c *Controller) execute(q *subQueue, cmd Command) {
	if cmd.Flags != 0 {
		// Fused operations and SGLs (PSDT) are not modelled.
		c.complete(q, cmd, StatusInvalidField, 0)
		return
	}
	if q.id == 0 {
		c.admin(q, cmd)
		return
	}
	switch cmd.Opcode {
	case CmdRead, CmdWrite:
		c.readWrite(q, cmd)
	case CmdFlush:
		// The drive reports no volatile write cache (Identify VWC 0):
		// written data is already safe, so Flush has nothing to do.
		if cmd.NSID != 1 && cmd.NSID != 0xffff_ffff {
			c.complete(q, cmd, StatusInvalidNamespace, 0)
			return
		}
		c.complete(q, cmd, StatusSuccess, 0)
	default:
		c.complete(q, cmd, StatusInvalidOpcode, 0)
	}
}

func (c *Controller) admin(q *subQueue, cmd Command) {
	switch cmd.Opcode {
	case AdminIdentify:
		c.identify(q, cmd)
	case AdminCreateCQ:
		c.complete(q, cmd, c.createCQ(cmd), 0)
	case AdminCreateSQ:
		c.complete(q, cmd, c.createSQ(cmd), 0)
	case AdminDeleteSQ:
		id := uint16(cmd.CDW10)
		if id == 0 || c.sqs[id] == nil {
			c.complete(q, cmd, StatusInvalidQID, 0)
			return
		}
		c.removeSQ(id)
		c.complete(q, cmd, StatusSuccess, 0)
	case AdminDeleteCQ:
		id := uint16(cmd.CDW10)
		cq := c.cqs[id]
		switch {
		case id == 0 || cq == nil:
			c.complete(q, cmd, StatusInvalidQID, 0)
		case cq.sqs > 0:
			c.complete(q, cmd, StatusInvalidQueueDeletion, 0)
		default:
			delete(c.cqs, id)
			c.complete(q, cmd, StatusSuccess, 0)
		}
	case AdminSetFeatures, AdminGetFeatures:
		if cmd.CDW10&0xff != FeatureNumQueues {
			c.complete(q, cmd, StatusInvalidField, 0)
			return
		}
		if cmd.Opcode == AdminSetFeatures && (cmd.CDW11&0xffff == 0xffff || cmd.CDW11>>16 == 0xffff) {
			c.complete(q, cmd, StatusInvalidField, 0)
			return
		}
		// The controller allocates all it has, whatever was asked,
		// and says so (NVMe Base 2.0, 5.27.1.5).
		n := uint32(c.numQueues - 1)
		c.complete(q, cmd, StatusSuccess, n|n<<16)
	case AdminAsyncEventReq:
		if len(c.aers) >= maxAERs {
			c.complete(q, cmd, StatusAERLimitExceeded, 0)
			return
		}
		c.aers = append(c.aers, cmd)
		c.deliverEvents()
	default:
		c.complete(q, cmd, StatusInvalidOpcode, 0)
	}
}

// createCQ is Create I/O Completion Queue: CDW10 QID (15:0) and QSIZE
// (31:16, 0-based), CDW11 PC (bit 0), IEN (bit 1) and IV (31:16), PRP1
// the queue's base (physically contiguous only: CAP.CQR).
func (c *Controller) createCQ(cmd Command) Status {
	id, size := uint16(cmd.CDW10), int(cmd.CDW10>>16)+1
	iv := int(cmd.CDW11 >> 16)
	switch {
	case id == 0 || int(id) > c.numQueues || c.cqs[id] != nil:
		return StatusInvalidQID
	case size < 2 || size > c.opt.MaxQueueEntries || c.cc>>CCIOCQESShift&0xf != 4:
		return StatusInvalidQSize
	case cmd.CDW11&1 == 0 || cmd.PRP1%c.page != 0:
		return StatusInvalidField
	case iv >= len(c.vectors):
		return StatusInvalidVector
	}
	c.cqs[id] = &compQueue{id: id, base: mem.DMAAddr(cmd.PRP1), size: size, phase: true, ien: cmd.CDW11&2 != 0, iv: iv}
	return StatusSuccess
}

// createSQ is Create I/O Submission Queue: CDW10 as createCQ's, CDW11
// PC (bit 0) and CQID (31:16).
func (c *Controller) createSQ(cmd Command) Status {
	id, size := uint16(cmd.CDW10), int(cmd.CDW10>>16)+1
	cqid := uint16(cmd.CDW11 >> 16)
	switch {
	case id == 0 || int(id) > c.numQueues || c.sqs[id] != nil:
		return StatusInvalidQID
	case size < 2 || size > c.opt.MaxQueueEntries || c.cc>>CCIOSQESShift&0xf != 6:
		return StatusInvalidQSize
	case cmd.CDW11&1 == 0 || cmd.PRP1%c.page != 0:
		return StatusInvalidField
	case cqid == 0 || c.cqs[cqid] == nil:
		return StatusCQInvalid
	}
	c.addSQ(&subQueue{id: id, base: mem.DMAAddr(cmd.PRP1), size: size, cqid: cqid})
	return StatusSuccess
}

// identify returns a 4 KiB data structure (NVMe Base 2.0, 5.17): the
// controller's (CNS 1), namespace 1's (CNS 0), or the active namespace
// list (CNS 2).
func (c *Controller) identify(q *subQueue, cmd Command) {
	b := make([]byte, IdentifyDataBytes)
	le := binary.LittleEndian
	switch cmd.CDW10 & 0xff {
	case CNSController:
		copy(b[4:24], pad(c.opt.Serial, 20))
		copy(b[24:64], pad(c.opt.Model, 40))
		copy(b[64:72], pad("1.0", 8))
		b[77] = c.opt.MDTS
		le.PutUint16(b[78:], 1) // CNTLID
		le.PutUint32(b[80:], Version)
		b[259] = maxAERs - 1 // AERL
		b[512] = 6<<4 | 6    // SQES: required and maximum 64 bytes
		b[513] = 4<<4 | 4    // CQES: 16 bytes
		le.PutUint32(b[516:], 1)
		// ONCS 0, VWC 0: no optional NVM commands, no volatile write
		// cache.
	case CNSNamespace:
		if cmd.NSID != 1 {
			c.complete(q, cmd, StatusInvalidNamespace, 0)
			return
		}
		n := c.ns.blocks
		le.PutUint64(b[0:], n)                               // NSZE
		le.PutUint64(b[8:], n)                               // NCAP
		le.PutUint64(b[16:], n)                              // NUSE
		b[25] = 0                                            // NLBAF: one format
		b[26] = 0                                            // FLBAS: format 0
		b[33] = 1                                            // DLFEAT: unwritten blocks read as zeros
		b[128+2] = uint8(bits.TrailingZeros64(c.ns.lbaSize)) // LBAF0.LBADS
	case CNSActiveNSList:
		if cmd.NSID < 1 {
			le.PutUint32(b[0:], 1)
		}
	default:
		c.complete(q, cmd, StatusInvalidField, 0)
		return
	}
	c.prps(cmd, IdentifyDataBytes, func(spans []dma.Span, st Status) {
		if !st.OK() {
			c.complete(q, cmd, st, 0)
			return
		}
		c.transfer(c.flow.data, c.fromDev, IdentifyDataBytes, nil, spans, b, func(i *dma.TransferInfo) {
			c.complete(q, cmd, dataStatus(i), 0)
		})
	})
}

// pad is s in an ASCII field of n bytes, space-filled as Identify's
// strings are.
func pad(s string, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = ' '
	}
	copy(b, s)
	return b
}

// dataStatus is a data transfer's completion status: a bus error (an
// IOMMU fault, an address beyond the mask) is Data Transfer Error.
func dataStatus(i *dma.TransferInfo) Status {
	if i.Err != nil {
		return StatusDataTransferError
	}
	return StatusSuccess
}

// readWrite is Read or Write: CDW10-11 SLBA, CDW12 bits 15:0 NLB
// (0-based). A read waits ReadLatency, then its data flows from the
// media through the device into host memory; a write's data flows from
// host memory (after the read request's trip) into the media, and the
// command completes WriteLatency after it has landed. A write whose
// DMA faults changes no block.
func (c *Controller) readWrite(q *subQueue, cmd Command) {
	slba := uint64(cmd.CDW10) | uint64(cmd.CDW11)<<32
	nlb := uint64(cmd.CDW12&0xffff) + 1
	n := nlb * c.ns.lbaSize
	switch {
	case cmd.NSID != 1:
		c.complete(q, cmd, StatusInvalidNamespace, 0)
		return
	case slba >= c.ns.blocks || nlb > c.ns.blocks-slba:
		c.complete(q, cmd, StatusLBAOutOfRange, 0)
		return
	case n > uint64(mem.PageSize)<<c.opt.MDTS:
		c.complete(q, cmd, StatusInvalidField, 0)
		return
	}
	c.prps(cmd, n, func(spans []dma.Span, st Status) {
		if !st.OK() {
			c.complete(q, cmd, st, 0)
			return
		}
		if cmd.Opcode == CmdRead {
			data := c.ns.read(slba, nlb)
			c.after(c.opt.ReadLatency, func() {
				c.transfer(c.flow.read, c.mediaIn, n, nil, spans, data, func(i *dma.TransferInfo) {
					if i.Err == nil {
						c.stats.BytesRead += n
					}
					c.complete(q, cmd, dataStatus(i), 0)
				})
			})
			return
		}
		c.after(c.oneWay, func() {
			c.transfer(c.flow.write, c.mediaOut, n, spans, nil, nil, func(i *dma.TransferInfo) {
				if i.Err != nil || uint64(len(i.Data)) != n {
					c.complete(q, cmd, StatusDataTransferError, 0)
					return
				}
				c.ns.write(slba, i.Data)
				c.stats.BytesWritten += n
				c.after(c.opt.WriteLatency, func() { c.complete(q, cmd, StatusSuccess, 0) })
			})
		})
	})
}

// prps resolves a command's data pointer for n bytes into the spans it
// names (NVMe Base 2.0, 4.1.1; Linux builds them in
// nvme_pci_setup_prps): PRP1 with an offset for the first page, then
// PRP2 as the second page, or, when more than two pages are needed, as
// a pointer to a PRP list whose last entry of each list page points to
// the next list page. Reading a list is a DMA read; one that faults is
// a Data Transfer Error. Pages after the first must be page aligned
// (PRP Offset Invalid otherwise). Adjacent pages merge into one span.
func (c *Controller) prps(cmd Command, n uint64, done func([]dma.Span, Status)) {
	page := c.page
	if cmd.PRP1&3 != 0 {
		done(nil, StatusPRPOffsetInvalid)
		return
	}
	first := min(n, page-cmd.PRP1%page)
	spans := []dma.Span{dma.BusSpan(mem.DMAAddr(cmd.PRP1), first)}
	rest := n - first
	switch {
	case rest == 0:
		done(spans, StatusSuccess)
		return
	case rest <= page:
		if cmd.PRP2%page != 0 {
			done(nil, StatusPRPOffsetInvalid)
			return
		}
		done(addSpan(spans, cmd.PRP2, rest), StatusSuccess)
		return
	}
	if cmd.PRP2&7 != 0 {
		done(nil, StatusPRPOffsetInvalid)
		return
	}
	c.prpList(cmd.PRP2, rest, spans, done)
}

// prpList reads the list page at list for rest more bytes.
func (c *Controller) prpList(list, rest uint64, spans []dma.Span, done func([]dma.Span, Status)) {
	page := c.page
	need := (rest + page - 1) / page
	room := (page - list%page) / 8
	chain := need > room
	k := min(need, room)
	c.readHost(c.flow.prp, mem.DMAAddr(list), k*8, func(i *dma.TransferInfo) {
		if i.Err != nil || uint64(len(i.Data)) < k*8 {
			done(nil, StatusDataTransferError)
			return
		}
		entries := k
		if chain {
			entries--
		}
		for j := range entries {
			e := binary.LittleEndian.Uint64(i.Data[j*8:])
			if e%page != 0 {
				done(nil, StatusPRPOffsetInvalid)
				return
			}
			l := min(rest, page)
			spans = addSpan(spans, e, l)
			rest -= l
		}
		if !chain {
			done(spans, StatusSuccess)
			return
		}
		next := binary.LittleEndian.Uint64(i.Data[(k-1)*8:])
		if next%page != 0 {
			done(nil, StatusPRPOffsetInvalid)
			return
		}
		c.prpList(next, rest, spans, done)
	})
}

// addSpan appends l bytes at a, merged into the last span when they
// follow it.
func addSpan(spans []dma.Span, a, l uint64) []dma.Span {
	last := &spans[len(spans)-1]
	if uint64(last.Bus)+last.Len == a {
		last.Len += l
		return spans
	}
	return append(spans, dma.BusSpan(mem.DMAAddr(a), l))
}
