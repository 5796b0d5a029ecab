package check

import (
	"fmt"
	"slices"

	"github.com/dmalab/dmalab/sim"
)

// DefaultMaxDiagnostics is Options.MaxDiagnostics' default.
const DefaultMaxDiagnostics = 10000

// Options configure a Checker. The zero value is usable.
type Options struct {
	// MaxDiagnostics bounds the diagnostics kept; later ones are counted
	// (Dropped, Count) but not stored. 0 means DefaultMaxDiagnostics.
	MaxDiagnostics int
	// Notify, when set, is called with every diagnostic as it is
	// detected, dropped ones included (strict mode stops the run there).
	Notify func(Diagnostic)
}

// Checker collects the diagnostics of every pack attached to it, in
// order of detection. It decides nothing itself: packs observe their
// subject and Record what they find. A Checker serves one simulation and
// is not safe for concurrent use; the engine runs one process at a time,
// and packs are called from it.
type Checker struct {
	opt Options

	diags []Diagnostic
	// counts is indexed by Class.id; it grows as classes are first
	// reported.
	counts  []int
	dropped int

	// batch collects one call's diagnostics while a pack checks the
	// items of a list (an sg list's segments), merged per class by
	// EndBatch.
	batch   bool
	pending []pending

	// atEnd are the packs' checks at the end of a run (AtEnd).
	atEnd []func(now sim.Time)
}

type pending struct {
	k *Class
	d Diagnostic
}

// New returns a Checker with no diagnostics and no packs; a pack's
// Attach hooks it to the pack's subject.
func New(opt Options) *Checker {
	if opt.MaxDiagnostics <= 0 {
		opt.MaxDiagnostics = DefaultMaxDiagnostics
	}
	return &Checker{opt: opt}
}

// Record reports a finding of class k: d's Class and Severity are k's.
// Inside a batch it is held until EndBatch.
func (c *Checker) Record(k *Class, d Diagnostic) {
	d.Class, d.Severity = k.info.Code, k.info.Severity
	if c.batch {
		c.pending = append(c.pending, pending{k, d})
		return
	}
	c.record(k, d)
}

func (c *Checker) record(k *Class, d Diagnostic) {
	if k.id >= len(c.counts) {
		c.counts = slices.Grow(c.counts, k.id+1-len(c.counts))[:k.id+1]
	}
	c.counts[k.id]++
	if len(c.diags) < c.opt.MaxDiagnostics {
		c.diags = append(c.diags, d)
	} else {
		c.dropped++
	}
	if c.opt.Notify != nil {
		c.opt.Notify(d)
	}
}

// BeginBatch starts one call over a list of items. debug.c checks each
// segment of a scatter-gather list and warns per segment; dmalab reports
// each class once per call, saying how many items it hit, so that one
// wrong nents is one finding, not 128.
func (c *Checker) BeginBatch() { c.batch = true }

// EndBatch ends the call: the first diagnostic of each class is
// recorded, in order of detection, with " (and N more items of this
// list)" added to its message when the class hit N other items (item is
// the singular: "segment").
func (c *Checker) EndBatch(item string) {
	c.batch = false
	p := c.pending
	for i := range p {
		if p[i].k == nil {
			continue
		}
		k, d := p[i].k, p[i].d
		n := 1
		for j := i + 1; j < len(p); j++ {
			if p[j].k == k {
				p[j].k = nil
				n++
			}
		}
		if n > 1 {
			d.Message += fmt.Sprintf(" (and %s of this list)", Plural(n-1, "more "+item))
		}
		c.record(k, d)
	}
	clear(p)
	c.pending = p[:0]
}

// AtEnd registers fn to run when the run ends (Finish): what a pack
// can only judge once nothing more will happen, as a fence that never
// signalled.
func (c *Checker) AtEnd(fn func(now sim.Time)) { c.atEnd = append(c.atEnd, fn) }

// Finish is the end of a run at virtual time now: the packs' end
// checks run, in the order they were registered. The system that owns
// the Checker calls it each time its engine stops; a pack reports each
// finding once, however often it is called.
func (c *Checker) Finish(now sim.Time) {
	for _, fn := range c.atEnd {
		fn(now)
	}
}

// Diagnostics returns the diagnostics kept, in order of detection.
func (c *Checker) Diagnostics() []Diagnostic { return slices.Clone(c.diags) }

// Report is the diagnostics as `dmalab check --json` prints them.
func (c *Checker) Report() Report {
	d := c.Diagnostics()
	if d == nil {
		d = []Diagnostic{}
	}
	return Report{Diagnostics: d, Dropped: c.dropped}
}

// Count is how many diagnostics of class code were detected, dropped ones
// included.
func (c *Checker) Count(code string) int {
	k := lookup(code)
	if k == nil || k.id >= len(c.counts) {
		return 0
	}
	return c.counts[k.id]
}

// Dropped is how many diagnostics were detected beyond MaxDiagnostics.
func (c *Checker) Dropped() int { return c.dropped }

// Origin is the provenance of the thing a diagnostic concerns, as
// Diagnostic.Origin holds it: the call that made it, when and by whom
// ("dma_map_single(...) at 12.3us by rx"); empty when the call is
// unknown.
func Origin(call string, t sim.Time, proc string) string {
	if call == "" {
		return ""
	}
	s := call + " at " + t.String()
	if proc != "" {
		s += " by " + proc
	}
	return s
}

// Plural is n and what, with an s past one: "1 mapping", "3 mappings".
func Plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
