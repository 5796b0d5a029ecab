package nvme

// Controller registers in BAR0 (NVMe Base Specification 2.0, 3.1.4,
// Figure 33; Linux's NVME_REG_* in include/linux/nvme.h).
const (
	RegCAP   = 0x00 // Controller Capabilities, 64 bits
	RegVS    = 0x08 // Version
	RegINTMS = 0x0C // Interrupt Mask Set
	RegINTMC = 0x10 // Interrupt Mask Clear
	RegCC    = 0x14 // Controller Configuration
	RegCSTS  = 0x1C // Controller Status
	RegAQA   = 0x24 // Admin Queue Attributes
	RegASQ   = 0x28 // Admin Submission Queue Base Address, 64 bits
	RegACQ   = 0x30 // Admin Completion Queue Base Address, 64 bits
	// RegDoorbells is where the doorbells start: queue y's submission
	// tail at RegDoorbells + 2y·(4 << CAP.DSTRD), its completion head
	// one stride after.
	RegDoorbells = 0x1000
	// BAR0Size is the register window: 16 KiB, as drives commonly
	// expose (Linux maps NVME_REG_DBS + 4096 at least).
	BAR0Size = 0x4000
)

// CAP fields.
const (
	CapMQESMask    = 0xffff // 15:0, maximum queue entries, 0-based
	CapCQR         = 1 << 16
	CapTOShift     = 24 // 31:24, in 500 ms units
	CapDSTRDShift  = 32 // 35:32, doorbell stride 4 << DSTRD bytes
	CapCSSNVM      = 1 << 37
	CapMPSMINShift = 48 // 51:48, minimum page size 2^(12+MPSMIN)
	CapMPSMAXShift = 52
)

// CC fields.
const (
	CCEnable       = 1 << 0
	CCCSSShift     = 4
	CCMPSShift     = 7 // 10:7, memory page size 2^(12+MPS)
	CCAMSShift     = 11
	CCSHNShift     = 14 // 15:14, shutdown notification
	CCIOSQESShift  = 16 // 19:16, log2 of the I/O SQ entry size
	CCIOCQESShift  = 20 // 23:20, log2 of the I/O CQ entry size
	CCSHNNormal    = 1 << CCSHNShift
	CCSHNMask      = 3 << CCSHNShift
	CCIOSQES64     = 6 << CCIOSQESShift
	CCIOCQES16     = 4 << CCIOCQESShift
	ccWritableMask = 0x00ff_fff1
)

// CSTS fields.
const (
	CSTSReady      = 1 << 0
	CSTSFatal      = 1 << 1 // Controller Fatal Status
	CSTSShstShift  = 2      // 3:2, shutdown status
	CSTSShstMask   = 3 << CSTSShstShift
	CSTSShstActive = 1 << CSTSShstShift
	CSTSShstDone   = 2 << CSTSShstShift
)

// Version is VS: NVMe 2.0.0.
const Version = 0x0002_0000

// DoorbellOffset is the offset of queue qid's submission tail doorbell
// (cq false) or completion head doorbell (cq true) for CAP.DSTRD dstrd.
func DoorbellOffset(qid uint16, cq bool, dstrd uint8) uint64 {
	idx := 2 * uint64(qid)
	if cq {
		idx++
	}
	return RegDoorbells + idx*(4<<dstrd)
}
