package dmaengine

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/dmalab/dmalab/mem"
)

// Descriptor is one hardware descriptor as the driver fills it: a
// transfer of Len bytes from Src to Dst, both bus addresses the device
// drives. A DevToMem channel ignores Src (the data comes from the
// device), a MemToDev channel ignores Dst. It is the counterpart of an
// AXI CDMA/AXI DMA scatter-gather descriptor, an I/OAT dma_desc or a
// NIC's rx/tx descriptor, as a dmaengine driver's prep callback writes it.
type Descriptor struct {
	Src, Dst mem.DMAAddr
	Len      uint64
	Flags    Flags
}

// Flags are a descriptor's control bits.
type Flags uint32

const (
	// FlagIRQ asks for an interrupt (an MSI) once the descriptor has
	// completed (DMA_PREP_INTERRUPT).
	FlagIRQ Flags = 1 << 0
	// FlagFence holds the descriptor's data phase until every earlier
	// descriptor of the channel has landed (DMA_PREP_FENCE; I/OAT's fence
	// bit): a copy that reads what an earlier one writes needs it, since
	// the engine otherwise overlaps transfers (Config.Inflight).
	FlagFence Flags = 1 << 1
)

func (f Flags) String() string {
	if f == 0 {
		return "0"
	}
	var s []string
	if f&FlagIRQ != 0 {
		s = append(s, "IRQ")
	}
	if f&FlagFence != 0 {
		s = append(s, "FENCE")
	}
	if rest := f &^ (FlagIRQ | FlagFence); rest != 0 {
		s = append(s, fmt.Sprintf("%#x", uint32(rest)))
	}
	return strings.Join(s, "|")
}

// The layout of one ring entry in memory, little-endian, as the engine
// fetches it: 32 bytes, so that an entry never straddles a 64-byte cache
// line and two entries share one. The status word (status and the
// transferred length) is written back by the engine into the same entry,
// as AXI DMA and most NIC rings do.
//
//	offset  size  field
//	0       8     source bus address
//	8       8     destination bus address
//	16      4     length in bytes
//	20      4     flags
//	24      4     status (StatusDone, StatusError)
//	28      4     bytes transferred
const (
	// DescSize is the size of one ring entry.
	DescSize = 32
	// StatusOffset and StatusSize locate the status word in an entry.
	StatusOffset = 24
	StatusSize   = 8
	// MaxLen is the longest transfer one descriptor can describe (its
	// length field is 32 bits); Copy splits longer ones.
	MaxLen = 1<<32 - 1
)

// Status is the status word the engine writes back when a descriptor
// completes.
type Status struct {
	Done  bool
	Error bool
	// Bytes is the length transferred: a received packet's size on a
	// DevToMem channel, Len otherwise.
	Bytes uint32
}

// Status bits.
const (
	StatusDone  = 1 << 0
	StatusError = 1 << 1
)

// encode writes d, with a cleared status word, into the 32-byte b.
func (d Descriptor) encode(b []byte) {
	binary.LittleEndian.PutUint64(b[0:], uint64(d.Src))
	binary.LittleEndian.PutUint64(b[8:], uint64(d.Dst))
	binary.LittleEndian.PutUint32(b[16:], uint32(d.Len))
	binary.LittleEndian.PutUint32(b[20:], uint32(d.Flags))
	clear(b[StatusOffset:DescSize])
}

// decodeDescriptor reads an entry's descriptor fields from b.
func decodeDescriptor(b []byte) Descriptor {
	return Descriptor{
		Src:   mem.DMAAddr(binary.LittleEndian.Uint64(b[0:])),
		Dst:   mem.DMAAddr(binary.LittleEndian.Uint64(b[8:])),
		Len:   uint64(binary.LittleEndian.Uint32(b[16:])),
		Flags: Flags(binary.LittleEndian.Uint32(b[20:])),
	}
}

// encode writes s into the 8-byte b.
func (s Status) encode(b []byte) {
	var w uint32
	if s.Done {
		w |= StatusDone
	}
	if s.Error {
		w |= StatusError
	}
	binary.LittleEndian.PutUint32(b[0:], w)
	binary.LittleEndian.PutUint32(b[4:], s.Bytes)
}

// decodeStatus reads a status word from the 8-byte b.
func decodeStatus(b []byte) Status {
	w := binary.LittleEndian.Uint32(b[0:])
	return Status{Done: w&StatusDone != 0, Error: w&StatusError != 0, Bytes: binary.LittleEndian.Uint32(b[4:])}
}
