package nvme

import (
	"encoding/binary"
	"fmt"
)

// Entry sizes (NVMe Base Specification 2.0, 4.2 and 4.6): a submission
// queue entry is 64 bytes (CC.IOSQES = 6), a completion queue entry 16
// (CC.IOCQES = 4).
const (
	SQESize = 64
	CQESize = 16
)

// Admin command opcodes (NVMe Base 2.0, Figure 28; Linux's enum
// nvme_admin_opcode in include/linux/nvme.h).
const (
	AdminDeleteSQ      uint8 = 0x00
	AdminCreateSQ      uint8 = 0x01
	AdminDeleteCQ      uint8 = 0x04
	AdminCreateCQ      uint8 = 0x05
	AdminIdentify      uint8 = 0x06
	AdminSetFeatures   uint8 = 0x09
	AdminGetFeatures   uint8 = 0x0A
	AdminAsyncEventReq uint8 = 0x0C
)

// NVM command set opcodes (NVM Command Set Specification 1.0, Figure 18;
// Linux's enum nvme_opcode).
const (
	CmdFlush uint8 = 0x00
	CmdWrite uint8 = 0x01
	CmdRead  uint8 = 0x02
)

// Identify CNS values (NVMe Base 2.0, Figure 274).
const (
	CNSNamespace      = 0x00
	CNSController     = 0x01
	CNSActiveNSList   = 0x02
	IdentifyDataBytes = 4096
)

// FeatureNumQueues is the Number of Queues feature (FID 07h).
const FeatureNumQueues = 0x07

// Command is one submission queue entry (struct nvme_command, the
// common command format of NVMe Base 2.0, Figure 88). CDW10 to CDW15
// are command specific.
type Command struct {
	Opcode uint8
	// Flags is CDW0 bits 15:8: FUSE (9:8) and PSDT (15:14); the model
	// takes PRPs only (PSDT 0).
	Flags uint8
	CID   uint16
	NSID  uint32
	// PRP1 and PRP2 are the data pointer (DPTR).
	PRP1, PRP2 uint64
	CDW10      uint32
	CDW11      uint32
	CDW12      uint32
	CDW13      uint32
	CDW14      uint32
	CDW15      uint32
}

// Marshal writes c as a 64-byte entry into b.
func (c *Command) Marshal(b []byte) {
	_ = b[SQESize-1]
	clear(b[:SQESize])
	le := binary.LittleEndian
	le.PutUint32(b[0:], uint32(c.Opcode)|uint32(c.Flags)<<8|uint32(c.CID)<<16)
	le.PutUint32(b[4:], c.NSID)
	le.PutUint64(b[24:], c.PRP1)
	le.PutUint64(b[32:], c.PRP2)
	for i, v := range []uint32{c.CDW10, c.CDW11, c.CDW12, c.CDW13, c.CDW14, c.CDW15} {
		le.PutUint32(b[40+4*i:], v)
	}
}

// ParseCommand reads a 64-byte entry.
func ParseCommand(b []byte) Command {
	_ = b[SQESize-1]
	le := binary.LittleEndian
	dw0 := le.Uint32(b[0:])
	return Command{
		Opcode: uint8(dw0), Flags: uint8(dw0 >> 8), CID: uint16(dw0 >> 16),
		NSID: le.Uint32(b[4:]), PRP1: le.Uint64(b[24:]), PRP2: le.Uint64(b[32:]),
		CDW10: le.Uint32(b[40:]), CDW11: le.Uint32(b[44:]), CDW12: le.Uint32(b[48:]),
		CDW13: le.Uint32(b[52:]), CDW14: le.Uint32(b[56:]), CDW15: le.Uint32(b[60:]),
	}
}

// Completion is one completion queue entry (struct nvme_completion,
// NVMe Base 2.0, Figure 89).
type Completion struct {
	// DW0 is the command-specific result.
	DW0 uint32
	// SQHead is the submission queue's head when the entry was posted:
	// entries before it may be reused. SQID says which queue.
	SQHead, SQID uint16
	CID          uint16
	// Phase is the phase tag: the controller inverts it at each pass
	// through the queue, so a driver knows a new entry by it.
	Phase  bool
	Status Status
}

// Marshal writes e as a 16-byte entry into b.
func (e *Completion) Marshal(b []byte) {
	_ = b[CQESize-1]
	le := binary.LittleEndian
	le.PutUint32(b[0:], e.DW0)
	le.PutUint32(b[4:], 0)
	le.PutUint32(b[8:], uint32(e.SQHead)|uint32(e.SQID)<<16)
	dw3 := uint32(e.CID) | uint32(e.Status.field())<<17
	if e.Phase {
		dw3 |= 1 << 16
	}
	le.PutUint32(b[12:], dw3)
}

// ParseCompletion reads a 16-byte entry.
func ParseCompletion(b []byte) Completion {
	_ = b[CQESize-1]
	le := binary.LittleEndian
	dw2, dw3 := le.Uint32(b[8:]), le.Uint32(b[12:])
	sf := uint16(dw3 >> 17)
	return Completion{
		DW0: le.Uint32(b[0:]), SQHead: uint16(dw2), SQID: uint16(dw2 >> 16),
		CID: uint16(dw3), Phase: dw3&(1<<16) != 0,
		Status: Status(sf&0xff) | Status(sf>>8&7)<<8,
	}
}

// Status is a completion's status: the Status Code Type in bits 10:8
// and the Status Code in bits 7:0 (the CQE's Status Field without its
// phase, CRD, More and DNR bits).
type Status uint16

// Status codes the controller returns (NVMe Base 2.0, Figures 102 and
// 103; NVM Command Set 1.0, Figure 35). SCT 0 is generic, SCT 1 command
// specific.
const (
	StatusSuccess              Status = 0x000
	StatusInvalidOpcode        Status = 0x001
	StatusInvalidField         Status = 0x002
	StatusDataTransferError    Status = 0x004
	StatusInvalidNamespace     Status = 0x00B
	StatusPRPOffsetInvalid     Status = 0x013
	StatusLBAOutOfRange        Status = 0x080
	StatusCQInvalid            Status = 0x100
	StatusInvalidQID           Status = 0x101
	StatusInvalidQSize         Status = 0x102
	StatusAERLimitExceeded     Status = 0x105
	StatusInvalidVector        Status = 0x108
	StatusInvalidQueueDeletion Status = 0x10C
)

// SCT is the status code type.
func (s Status) SCT() uint8 { return uint8(s >> 8 & 7) }

// SC is the status code.
func (s Status) SC() uint8 { return uint8(s) }

// OK reports success.
func (s Status) OK() bool { return s == StatusSuccess }

// field is the Status Field's low 11 bits: SC in 7:0, SCT in 10:8.
func (s Status) field() uint16 { return uint16(s.SC()) | uint16(s.SCT())<<8 }

var statusNames = map[Status]string{
	StatusSuccess:              "Successful Completion",
	StatusInvalidOpcode:        "Invalid Command Opcode",
	StatusInvalidField:         "Invalid Field in Command",
	StatusDataTransferError:    "Data Transfer Error",
	StatusInvalidNamespace:     "Invalid Namespace or Format",
	StatusPRPOffsetInvalid:     "PRP Offset Invalid",
	StatusLBAOutOfRange:        "LBA Out of Range",
	StatusCQInvalid:            "Completion Queue Invalid",
	StatusInvalidQID:           "Invalid Queue Identifier",
	StatusInvalidQSize:         "Invalid Queue Size",
	StatusAERLimitExceeded:     "Asynchronous Event Request Limit Exceeded",
	StatusInvalidVector:        "Invalid Interrupt Vector",
	StatusInvalidQueueDeletion: "Invalid Queue Deletion",
}

func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return fmt.Sprintf("%s (SCT %d SC %#02x)", n, s.SCT(), s.SC())
	}
	return fmt.Sprintf("SCT %d SC %#02x", s.SCT(), s.SC())
}

// Asynchronous event information (NVMe Base 2.0, Figures 148 and 149):
// an Asynchronous Event Request completes with DW0 = type | info<<8 |
// log page<<16.
const (
	EventTypeError = 0x0
	// EventInvalidDoorbell: the host wrote a doorbell of a queue that
	// does not exist. EventInvalidDoorbellValue: it wrote a value
	// beyond the queue (a tail past its size, a head it had not been
	// given).
	EventInvalidDoorbell      = 0x00
	EventInvalidDoorbellValue = 0x01
	// LogErrorInformation is the log page an error event points to.
	LogErrorInformation = 0x01
)

// AsyncEvent is an asynchronous event as DW0 of the completion of an
// Asynchronous Event Request carries it.
type AsyncEvent struct {
	Type, Info, LogPage uint8
}

// DW0 encodes e.
func (e AsyncEvent) DW0() uint32 {
	return uint32(e.Type) | uint32(e.Info)<<8 | uint32(e.LogPage)<<16
}

// ParseAsyncEvent decodes DW0.
func ParseAsyncEvent(dw0 uint32) AsyncEvent {
	return AsyncEvent{Type: uint8(dw0 & 7), Info: uint8(dw0 >> 8), LogPage: uint8(dw0 >> 16)}
}
