package dma

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// pipeTranslator is slowTranslator as a Pipeline: an access's first
// page is walked before its bytes move, the rest while they move.
type pipeTranslator struct{ slowTranslator }

func (pipeTranslator) Ways() int { return 2 }

// TestReusedTransferState: transient transfers, whose state the layer
// reuses without clearing it whole (start, startXfer.reset), hand their
// callbacks the same TransferInfo as the same transfers not transient,
// each with a state of its own, new. The draws alternate translators
// with and without cost (and overlap), reads and writes of zero to two
// spans, failing spans, payload bytes, and transfers that fail before
// they start (no route), one or two at a time.
func TestReusedTransferState(t *testing.T) {
	type draw struct {
		tr, route, nread, nwrite, bad, size, pair int
		dep                                       bool
		seed                                      uint64
	}
	rng := rand.New(rand.NewPCG(17, 18))
	draws := make([]draw, 3000)
	for i := range draws {
		draws[i] = draw{
			tr: rng.IntN(4), route: rng.IntN(6), nread: rng.IntN(3), nwrite: rng.IntN(3),
			bad: rng.IntN(8), size: 1 + rng.IntN(3*int(mem.PageSize)), pair: rng.IntN(3),
			dep: rng.IntN(2) == 0, seed: rng.Uint64(),
		}
	}
	const off = 1 << 40
	run := func(transient bool) []TransferInfo {
		m, x, g := xferRig(t, true)
		gpu := m.GPUs[0]
		host, _ := m.HostMemory(0)
		buf, err := m.Mem.Kmalloc(0, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		pa, _ := m.Mem.VirtToPhys(buf)
		route, err := m.DMARoute(host, gpu.Memory(), gpu.CE())
		if err != nil {
			t.Fatal(err)
		}
		trs := []Translator{
			Direct{},
			slowTranslator{off: off, walk: 300 * sim.Nanosecond, fault: ^mem.DMAAddr(0)},
			pipeTranslator{slowTranslator{off: off, walk: 200 * sim.Nanosecond, fault: ^mem.DMAAddr(0)}},
			slowTranslator{off: off, walk: 50 * sim.Nanosecond, fault: mem.DMAAddr(pa) + off + 5*mem.DMAAddr(mem.PageSize)},
		}
		offs := []mem.DMAAddr{0, off, off, off}
		var infos []TransferInfo
		done := func(i *TransferInfo) {
			c := *i
			c.Flow = nil // a flow of its own in each run
			infos = append(infos, c)
		}
		start := func(d draw) {
			g.SetTranslator(trs[d.tr])
			drng := rand.New(rand.NewPCG(d.seed, 1))
			span := func() Span {
				a := mem.DMAAddr(pa) + offs[d.tr] + mem.DMAAddr(drng.IntN(200)*64)
				if drng.IntN(8) < d.bad/4 {
					a += 1 << 50 // no RAM there, whatever the translator
				}
				return BusSpan(a, uint64(d.size))
			}
			tr := &Transfer{Name: "reuse", Bytes: int64(d.size), Dependent: d.dep, Transient: transient}
			for range d.nread {
				tr.Read = append(tr.Read, span())
			}
			for range d.nwrite {
				tr.Write = append(tr.Write, span())
			}
			if d.nread == 0 {
				tr.Data = make([]byte, d.size*d.nwrite)
				for k := range tr.Data {
					tr.Data[k] = byte(drng.Uint32())
				}
			}
			switch d.route {
			case 0:
				// No route between these endpoints: start fails before
				// the transfer moves.
				tr.Src, tr.Dst, tr.Master = machine.Endpoint{}, machine.Endpoint{}, gpu.CE()
			case 1, 2:
				tr.Src, tr.Dst, tr.Master = host, gpu.Memory(), gpu.CE()
			default:
				r := route
				tr.Route, tr.Master, tr.Load = &r, gpu.CE(), d.route == 3
			}
			if _, err := g.StartTransfer(tr, done); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < len(draws); i++ {
			start(draws[i])
			if draws[i].pair == 0 && i+1 < len(draws) {
				// Two at once: the second takes another state.
				i++
				start(draws[i])
			}
			m.Engine.Run()
		}
		if transient && len(x.freeXfers) == 0 {
			t.Fatal("no transfer state kept for reuse")
		}
		return infos
	}
	reused, fresh := run(true), run(false)
	if len(reused) != len(draws) || len(fresh) != len(draws) {
		t.Fatalf("%d and %d transfers done, want %d", len(reused), len(fresh), len(draws))
	}
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	var failed, noRoute, translated, overlapped int
	for i := range draws {
		r, f := reused[i], fresh[i]
		for _, e := range [][2]error{{r.Err, f.Err}, {r.ReadErr, f.ReadErr}, {r.WriteErr, f.WriteErr}} {
			if errText(e[0]) != errText(e[1]) {
				t.Fatalf("transfer %d (%+v): error %v reused, %v fresh", i, draws[i], e[0], e[1])
			}
		}
		if f.Err != nil {
			failed++
			if f.Route.Hops == nil && f.Move == 0 {
				noRoute++
			}
		}
		if f.Translate > 0 {
			translated++
		}
		if f.overlap > 0 {
			overlapped++
		}
		r.Err, r.ReadErr, r.WriteErr, f.Err, f.ReadErr, f.WriteErr = nil, nil, nil, nil, nil, nil
		// By what they print: the endpoints and routes are each run's
		// machine's.
		rv, fv := reflect.ValueOf(r), reflect.ValueOf(f)
		for k := range rv.NumField() {
			if a, b := fmt.Sprintf("%+v", rv.Field(k)), fmt.Sprintf("%+v", fv.Field(k)); a != b {
				t.Fatalf("transfer %d (%+v): %s %.200s reused, %.200s fresh", i, draws[i], rv.Type().Field(k).Name, a, b)
			}
		}
	}
	t.Logf("%d failed, %d without a route, %d translated, %d overlapped", failed, noRoute, translated, overlapped)
	if noRoute < 100 || failed-noRoute < 100 || translated < 100 || overlapped < 100 {
		t.Fatalf("draws exercise too little: %d failed, %d of them without a route, %d translated, %d overlapped", failed, noRoute, translated, overlapped)
	}
}

// translateAllReference is translateAll as it was before it skipped a
// side with no spans: both sides through translateInto.
func (d *Device) translateAllReference(t *Transfer, info *TransferInfo, rbuf, wbuf []mem.PhysRange) (reads, writes []mem.PhysRange, err error) {
	reads, cost, rerr := d.translateInto(rbuf, t.Read, false)
	var wcost xlat
	var werr error
	if rerr == nil || !t.Dependent {
		writes, wcost, werr = d.translateInto(wbuf, t.Write, true)
	}
	c := cost.add(wcost)
	info.Translate = c.lead
	info.overlap = c.overlap
	info.ReadErr, info.WriteErr = rerr, werr
	info.Err = nil
	if rerr != nil || werr != nil {
		info.Err = errors.Join(rerr, werr)
	}
	return reads, writes, info.Err
}

// TestTranslateAllSkipsEmptySides: translateAll gives the ranges, costs
// and errors of translateAllReference, on random transfers of zero to
// two spans a side, some failing, Dependent or not, under translators
// with and without cost.
func TestTranslateAllSkipsEmptySides(t *testing.T) {
	m, _, g := xferRig(t, false)
	buf, err := m.Mem.Kmalloc(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	pa, _ := m.Mem.VirtToPhys(buf)
	const off = 1 << 40
	trs := []Translator{
		Direct{},
		pipeTranslator{slowTranslator{off: off, walk: 200 * sim.Nanosecond, fault: mem.DMAAddr(pa) + off + 5*mem.DMAAddr(mem.PageSize)}},
	}
	offs := []mem.DMAAddr{0, off}
	rng := rand.New(rand.NewPCG(21, 22))
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	var skipped, dependentFail int
	for i := range 20000 {
		k := rng.IntN(len(trs))
		g.SetTranslator(trs[k])
		span := func() Span {
			a := mem.DMAAddr(pa) + offs[k] + mem.DMAAddr(rng.IntN(200)*64)
			if rng.IntN(4) == 0 {
				a += 1 << 50
			}
			return BusSpan(a, 1+uint64(rng.IntN(3*int(mem.PageSize))))
		}
		tr := &Transfer{Dependent: rng.IntN(2) == 0}
		for range rng.IntN(3) {
			tr.Read = append(tr.Read, span())
		}
		for range rng.IntN(3) {
			tr.Write = append(tr.Write, span())
		}
		var rb, wb, rbRef, wbRef [2]mem.PhysRange
		var info, infoRef TransferInfo
		reads, writes, err := g.translateAll(tr, &info, rb[:0], wb[:0])
		readsRef, writesRef, errRef := g.translateAllReference(tr, &infoRef, rbRef[:0], wbRef[:0])
		got := fmt.Sprintf("%v %v %q %v %v %q %q", reads, writes, errText(err), info.Translate, info.overlap, errText(info.ReadErr), errText(info.WriteErr))
		want := fmt.Sprintf("%v %v %q %v %v %q %q", readsRef, writesRef, errText(errRef), infoRef.Translate, infoRef.overlap, errText(infoRef.ReadErr), errText(infoRef.WriteErr))
		if got != want {
			t.Fatalf("transfer %d (reads %v, writes %v, dependent %v):\ngot  %s\nwant %s", i, tr.Read, tr.Write, tr.Dependent, got, want)
		}
		if len(tr.Read) == 0 || len(tr.Write) == 0 {
			skipped++
		}
		if tr.Dependent && infoRef.ReadErr != nil && len(tr.Write) > 0 {
			dependentFail++
		}
	}
	if skipped < 1000 || dependentFail < 1000 {
		t.Fatalf("draws exercise too little: %d with a side empty, %d dependent with a failed read", skipped, dependentFail)
	}
}
