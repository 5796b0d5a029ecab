package check_test

import (
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/check/dmadebug"
	"github.com/dmalab/dmalab/check/gpumem"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/sim"
)

// TestNewPack: a pack added beside the others registers its class,
// reports through the same Checker as the DMA-API pack, in order of
// detection, and is listed after the packs of lower rank.
func TestNewPack(t *testing.T) {
	c := check.New(check.Options{})
	u := &fakeIOMMU{}
	attachIOMMU(c, u)
	dbg := dmadebug.New(c, dmadebug.Options{})

	ev := dma.Event{Op: dma.OpUnmap, Kind: dma.KindSingle, Header: sim.Header{Proc: "rx"}, Device: "nic0",
		Addr: 0x1000, Size: 64, Dir: dma.FromDevice}
	ev.Time = sim.Microsecond
	dbg.DMA(&ev)
	u.fault(3*sim.Microsecond, "nic0", 0x2000, true)

	got := c.Diagnostics()
	if len(got) != 2 || got[0].Class != dmadebug.UnmapUnknown || got[1].Class != ioPageFault {
		t.Fatalf("diagnostics %v, want unmap-unknown then %s", got, ioPageFault)
	}
	want := "3us error iommu-page-fault nic0 [iova:0x2000]: nic0 writes an IOVA its domain does not map; " +
		"made by iommu_unmap(dom0, 0x2000, 4096) at 2us by driver"
	if s := got[1].String(); s != want {
		t.Errorf("got  %s\nwant %s", s, want)
	}
	if c.Count(ioPageFault) != 1 || c.Count(dmadebug.UnmapUnknown) != 1 || c.Count("no-such-class") != 0 {
		t.Errorf("counts: %d, %d", c.Count(ioPageFault), c.Count(dmadebug.UnmapUnknown))
	}
	info, ok := check.Lookup(ioPageFault)
	if !ok || info.Severity != check.Error || ioClasses[0].Pack() != "iommu" || ioClasses[0].Code() != ioPageFault {
		t.Errorf("Lookup: %+v %v", info, ok)
	}
	all := check.Classes()
	if all[len(all)-1] != info {
		t.Errorf("the rank-300 class is not last: %v", all[len(all)-1])
	}
}

// TestClassOrder pins what `dmalab check --classes` lists: the 22 of the
// DMA-API pack (19 of debug.c, 3 of dmalab), then the 5 of GPU memory,
// codes unchanged; then, in this test binary only, the fake pack's.
func TestClassOrder(t *testing.T) {
	want := []string{
		"unmap-unknown", "unmap-size", "unmap-type", "free-coherent-address", "unmap-sg-count",
		"unmap-direction", "map-error-unchecked", "sync-unknown", "sync-range", "sync-direction",
		"sync-cpu-to-device-buffer", "sync-device-from-device-buffer", "sync-sg-count",
		"map-illegal-memory", "map-resource-ram", "sg-segment", "cacheline-overlap",
		"cacheline-overflow", "unbind-leak",
		"cpu-access-device-owned", "stale-read", "device-access-unmapped",
		"cpu-deref-device-pointer", "managed-access-rule", "use-after-free",
		"kernel-unpinned-host-memory", "foreign-context-pointer",
		ioPageFault,
	}
	var got []string
	for _, c := range check.Classes() {
		got = append(got, c.Code)
	}
	if !slices.Equal(got, want) {
		t.Errorf("classes\n got %v\nwant %v", got, want)
	}
	packs := slices.Concat(dmadebug.Classes(), gpumem.Classes())
	if !slices.Equal(packs, check.Classes()[:27]) {
		t.Error("the packs' own lists differ from the registry's")
	}
}

// TestRegisterRejects: a pack name or code used twice, an empty code
// and an unknown severity are bugs found at registration.
func TestRegisterRejects(t *testing.T) {
	for _, tc := range []struct {
		name, pack string
		info       check.ClassInfo
	}{
		{"pack twice", "iommu", check.ClassInfo{Code: "fresh-code-1", Severity: check.Error}},
		{"code twice", "fresh-pack-1", check.ClassInfo{Code: dmadebug.StaleRead, Severity: check.Error}},
		{"empty code", "fresh-pack-2", check.ClassInfo{Severity: check.Error}},
		{"severity", "fresh-pack-3", check.ClassInfo{Code: "fresh-code-2", Severity: "fatal"}},
		{"unnamed pack", "", check.ClassInfo{Code: "fresh-code-3", Severity: check.Error}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("registered")
				}
			}()
			check.Register(tc.pack, 400, tc.info)
		})
	}
	if _, ok := check.Lookup("fresh-code-1"); ok {
		t.Error("a rejected pack left a class behind")
	}
}

// TestBatch: inside a batch, each class is recorded once, in order of
// first detection, saying how many more items it hit.
func TestBatch(t *testing.T) {
	c := check.New(check.Options{})
	u := &fakeIOMMU{}
	attachIOMMU(c, u)
	c.BeginBatch()
	for i := range 4 {
		u.fault(sim.Microsecond, "nic0", uint64(0x1000*(i+1)), false)
	}
	if len(c.Diagnostics()) != 0 {
		t.Fatal("recorded before the batch ended")
	}
	c.EndBatch("page")
	d := c.Diagnostics()
	if len(d) != 1 || !strings.HasSuffix(d[0].Message, " (and 3 more pages of this list)") || d[0].Buffer != "iova:0x1000" {
		t.Fatalf("got %v", d)
	}
	if c.Count(ioPageFault) != 1 {
		t.Errorf("count %d, want 1 per call", c.Count(ioPageFault))
	}
	c.BeginBatch()
	u.fault(sim.Microsecond, "nic0", 0x9000, false)
	c.EndBatch("page")
	if d := c.Diagnostics(); len(d) != 2 || strings.Contains(d[1].Message, "more") {
		t.Errorf("a batch of one: %v", d)
	}
}

// TestBounded: past MaxDiagnostics diagnostics are counted and notified,
// not kept.
func TestBounded(t *testing.T) {
	var notified int
	c := check.New(check.Options{MaxDiagnostics: 2, Notify: func(check.Diagnostic) { notified++ }})
	u := &fakeIOMMU{}
	attachIOMMU(c, u)
	for i := range 5 {
		u.fault(sim.Time(i)*sim.Microsecond, "nic0", 0x1000, false)
	}
	r := c.Report()
	if len(r.Diagnostics) != 2 || r.Dropped != 3 || c.Dropped() != 3 || c.Count(ioPageFault) != 5 || notified != 5 {
		t.Errorf("kept %d, dropped %d, counted %d, notified %d", len(r.Diagnostics), r.Dropped, c.Count(ioPageFault), notified)
	}
	b, err := json.Marshal(check.New(check.Options{}).Report())
	if err != nil || string(b) != `{"diagnostics":[]}` {
		t.Errorf("empty report: %s, %v", b, err)
	}
}

func TestProvenanceHelpers(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{check.Origin("dma_map_single(nic0)", 1500*sim.Nanosecond, "rx"), "dma_map_single(nic0) at 1.5us by rx"},
		{check.Origin("dma_map_single(nic0)", 0, ""), "dma_map_single(nic0) at 0s"},
		{check.Origin("", sim.Microsecond, "rx"), ""},
		{check.Plural(1, "segment"), "1 segment"},
		{check.Plural(3, "more segment"), "3 more segments"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// TestFrameworkImports: the framework knows no subject. Only the packs
// import dma, mem or cuda.
func TestFrameworkImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := parser.ParseFile(fset, f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range af.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if strings.Contains(p, ".") && p != "github.com/dmalab/dmalab/sim" {
				t.Errorf("%s imports %s: the framework may import only sim and the standard library", f, p)
			}
		}
	}
}

// TestFinish: the end checks run at each Finish, in the order
// registered, with the time the run ended.
func TestFinish(t *testing.T) {
	c := check.New(check.Options{})
	var got []string
	for _, name := range []string{"first", "second"} {
		c.AtEnd(func(now sim.Time) { got = append(got, fmt.Sprintf("%s@%v", name, now)) })
	}
	c.Finish(3 * sim.Microsecond)
	c.Finish(5 * sim.Microsecond)
	want := []string{"first@3us", "second@3us", "first@5us", "second@5us"}
	if !slices.Equal(got, want) {
		t.Errorf("end checks ran %v, want %v", got, want)
	}
}
