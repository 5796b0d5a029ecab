package dmaengine

import "github.com/dmalab/dmalab/sim"

// The fixed costs of the CPU↔engine protocol that the platform spec does
// not describe. Each is an assumption with its source; Timing lets a
// scenario or a calibration replace them.
const (
	// MMIOWriteCost is the CPU time of one doorbell write (writel to an
	// uncached BAR register): the store is posted, but an uncached store
	// holds the core until it leaves in order. Assumed 100 ns: an Intel
	// community thread ("Why do MemReq TLPs take 100s nanoseconds to be
	// generated after MMIO writes?", 2020) measures 50-300 ns between
	// successive uncached MMIO write TLPs from one Xeon core, i.e. the
	// issue cost of each; to be measured.
	MMIOWriteCost = 100 * sim.Nanosecond

	// MSILatency is the time from an MSI write reaching the root complex
	// to the first instruction of the handler on an awake core: interrupt
	// remapping, the local APIC, the core taking the interrupt at an
	// instruction boundary, the kernel's entry into the registered
	// handler. Assumed 1 µs, the order of MSI-to-ISR latencies reported
	// for x86 servers with no C-state exit (a deep C-state adds tens to
	// hundreds of µs); to be measured.
	MSILatency = 1 * sim.Microsecond

	// IRQEntryCost is the CPU time the handler's core spends per
	// interrupt outside the driver's own work: interrupt entry, irq_desc
	// dispatch, the APIC EOI and the return. Assumed 500 ns (about 1,000
	// cycles at 2 GHz); to be measured.
	IRQEntryCost = 500 * sim.Nanosecond

	// DefaultPollInterval is the spacing of a busy-poll loop's reads of a
	// status word (the cpu_relax pause between them). Model choice; the
	// loop's whole duration is CPU time.
	DefaultPollInterval = 100 * sim.Nanosecond
)

// Timing holds the protocol costs a channel uses. The zero value of a
// field means its named default.
type Timing struct {
	MMIOWrite sim.Time // default MMIOWriteCost
	MSI       sim.Time // default MSILatency
	IRQEntry  sim.Time // default IRQEntryCost
}

// withDefaults fills zero fields with the named defaults.
func (t Timing) withDefaults() Timing {
	if t.MMIOWrite == 0 {
		t.MMIOWrite = MMIOWriteCost
	}
	if t.MSI == 0 {
		t.MSI = MSILatency
	}
	if t.IRQEntry == 0 {
		t.IRQEntry = IRQEntryCost
	}
	return t
}
