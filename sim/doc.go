// Package sim is dmalab's discrete-event engine: integer-picosecond
// virtual time, events ordered by (time, sequence), processes written as
// sequential Go code that block in virtual time, and a seeded RNG.
//
// Its real-world counterparts are simulation kernels such as Akita's
// (integer picosecond time, (time, seq) ordering) and SimGrid's
// (processes that block on activities). Hardware models (DMA engines,
// IOMMU walkers, the unified-memory fault handler) are event-driven state
// machines scheduled with At and After; software (applications, driver
// paths) is a Proc.
//
// Run cannot tell a clean end from a stall; Guard runs the engine within
// a horizon and an event budget and says how it ended: every process
// done, processes blocked with nothing left to wake them (*StallError,
// each with what it waits on), or a limit reached (*LimitError).
//
// Invariants: time never goes backwards (scheduling into the past
// panics); exactly one process runs at a time and only from event
// context; for the same inputs and seed, the sequence of events, and so
// every output, is identical.
package sim
