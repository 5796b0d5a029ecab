package check

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
)

// Severities, as the kernel would treat the finding: an error is a bug
// that corrupts data or state on some machine; a warning is a finding
// that is a bug only on some paths (an unchecked map may have succeeded).
const (
	Error   = "error"
	Warning = "warning"
)

// ClassInfo describes one diagnostic class.
type ClassInfo struct {
	// Code is stable and kebab-case: scenarios, JSON and
	// `dmalab check --classes` key on it, and it never changes.
	Code     string `json:"code"`
	Severity string `json:"severity"`
	// Summary is one line for `dmalab check --classes`.
	Summary string `json:"summary"`
	// Source is what makes the check in the real system (a function of
	// kernel/dma/debug.c), or "dmalab" for checks nothing real makes.
	Source string `json:"source"`
}

// Class is a registered class: what a pack reports a diagnostic with.
// It is immutable once registered, so reporting reads it without a lock.
type Class struct {
	info ClassInfo
	// id indexes a Checker's counts.
	id int
	// rank and index order Classes: the pack's rank, then the class's
	// place in its pack.
	rank, index int
	pack        string
}

// Info is the class's description.
func (k *Class) Info() ClassInfo { return k.info }

// Code is the class's code.
func (k *Class) Code() string { return k.info.Code }

// Pack is the name of the pack that registered the class.
func (k *Class) Pack() string { return k.pack }

// registry holds every class of every pack. Packs register from their
// package's initialisation, so that the classes a binary can report are
// known before anything runs, whether or not a pack is attached.
var registry struct {
	mu      sync.RWMutex
	packs   map[string]bool // protected by mu
	classes []*Class        // protected by mu; in id order
	byCode  map[string]*Class
}

// Register adds a rule pack's classes and returns their handles, in the
// order given. Classes lists packs by rank, lowest first, and each
// pack's classes in the order given: the kernel's DMA API debugging
// (with dmalab's coherency classes) ranks 100, GPU memory 200, the
// IOMMU 300, DMA-BUF 400 and GPUDirect RDMA 500, and a new pack takes a rank of its own. Register panics on an empty or
// reused pack name, an empty code, a code another class has, or a
// severity other than Error and Warning: codes are a stable interface,
// and a clash is a bug the first run finds.
func Register(pack string, rank int, classes ...ClassInfo) []*Class {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if pack == "" || registry.packs[pack] {
		panic(fmt.Sprintf("check: pack %q registered twice or unnamed", pack))
	}
	if registry.packs == nil {
		registry.packs = make(map[string]bool)
		registry.byCode = make(map[string]*Class)
	}
	out := make([]*Class, len(classes))
	for i, ci := range classes {
		if ci.Code == "" || registry.byCode[ci.Code] != nil {
			panic(fmt.Sprintf("check: pack %s: class code %q empty or registered twice", pack, ci.Code))
		}
		if ci.Severity != Error && ci.Severity != Warning {
			panic(fmt.Sprintf("check: pack %s: class %s: severity %q", pack, ci.Code, ci.Severity))
		}
		k := &Class{info: ci, id: len(registry.classes), rank: rank, index: i, pack: pack}
		registry.classes = append(registry.classes, k)
		registry.byCode[ci.Code] = k
		out[i] = k
	}
	registry.packs[pack] = true
	return out
}

// Classes lists every registered class: by pack rank, then in the order
// each pack gave. In dmalab's binary that is the 19 classes of
// kernel/dma/debug.c, dmalab's three coherency classes, the five of
// GPU memory, the five of the IOMMU and VFIO, the eight of DMA-BUF
// and its fences and the nine of GPUDirect RDMA, as `dmalab check
// --classes` prints them.
func Classes() []ClassInfo {
	registry.mu.RLock()
	ks := slices.Clone(registry.classes)
	registry.mu.RUnlock()
	slices.SortFunc(ks, func(a, b *Class) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.pack, b.pack), cmp.Compare(a.index, b.index))
	})
	out := make([]ClassInfo, len(ks))
	for i, k := range ks {
		out[i] = k.info
	}
	return out
}

// Lookup returns the class with code, of any pack.
func Lookup(code string) (ClassInfo, bool) {
	if k := lookup(code); k != nil {
		return k.info, true
	}
	return ClassInfo{}, false
}

// Find returns the registered class with code, nil if there is none:
// what a program that forwards another checker's diagnostics records
// them under.
func Find(code string) *Class { return lookup(code) }

func lookup(code string) *Class {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	return registry.byCode[code]
}

// Infos is the ClassInfo of each of cs, in order: what a pack's Classes
// returns.
func Infos(cs []*Class) []ClassInfo {
	out := make([]ClassInfo, len(cs))
	for i, c := range cs {
		out[i] = c.Info()
	}
	return out
}
