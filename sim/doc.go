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
// A process has one of two forms, as in SystemC (SC_THREAD and
// SC_METHOD). A Proc (Spawn) is a coroutine: sequential code that calls
// Sleep, Wait, WaitUntil and Join and is suspended inside them, with a
// goroutine stack of its own (2 KiB at least, about 2.5 KB with its
// runtime.g). A StepProc (SpawnStep) is a step function without a stack:
// the engine calls it at each resume and it returns what it waits for
// next (SleepFor, WaitFor, WaitOn) or Exit, as an SC_METHOD names its
// next trigger; its state is the step's own variables, and a blocked one
// costs about 210 bytes, so a million of them fit in 200 MiB where a
// million coroutines need 2.8 GiB
// (docs/measurements/2026-11-29-scale-procs.md).
// Both forms have a name, a spawn order, CPU time and an exit that other
// processes wait on, appear in deadlock reports and end at Close, and a
// StepProc is resumed at the same (time, sequence) positions as the Proc
// that does the same things, so converting one changes no output.
//
// A Proc's Sleep that ends before anything else is due, under Run,
// RunUntil or Guard, goes on at once with the clock advanced, as the
// event of its resume would have made it, without scheduling that event
// or leaving the coroutine: nothing could run between the two switches,
// so nothing can tell, and a driver's per-packet work (map, submit,
// doorbell, each a Sleep for its CPU time) costs no switch.
// SleepAlone takes several such sleeps at once, for a model that knows
// what its short steps do and that nothing else can run between them.
// A Proc marked RunAhead goes further: when other events are due before
// its sleep ends, it runs them itself, on its own coroutine, in the
// order and at the times the loop would, up to its own resume, and goes
// on without a switch; the price is a promise that no event run so runs
// the engine itself (the engine panics if one does). A NIC's driver and
// interrupt handler, which sleep between the device's events, are such
// processes.
//
// Events due at the very instant they are scheduled (a process woken, a
// recompute at once) wait in a FIFO lane instead of the heap: the heap's
// events due at that instant were all scheduled before it, so the lane
// after them is still (time, sequence) order.
//
// A Proc that returns leaves its coroutine to the engine, which runs the
// next Proc to start on it (a few are kept; Close ends them, as does
// collecting an engine never closed): a model that spawns a short
// process per event (a driver's bottom half per fault interrupt) pays
// for no new goroutine, and no growth of a fresh stack, each time.
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
