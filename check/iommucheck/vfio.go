package iommucheck

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/vfio"
)

// vfioRecent is how many of a space's last map calls a diagnostic
// names as its origins.
const vfioRecent = 3

// vfioSpace is what the pack knows of a user IO address space (a VFIO
// container, an iommufd IOAS): its process, every IOVA range it ever
// mapped (merged), and its last map calls.
type vfioSpace struct {
	name, proc string
	mapped     []span
	recent     []call
}

type span struct{ lo, hi uint64 }

// add merges [lo, hi) into the ranges.
func (sp *vfioSpace) add(lo, hi uint64) {
	i, _ := slices.BinarySearchFunc(sp.mapped, lo, func(s span, a uint64) int {
		if s.hi < a {
			return -1
		}
		return 1
	})
	j := i
	for j < len(sp.mapped) && sp.mapped[j].lo <= hi {
		lo, hi = min(lo, sp.mapped[j].lo), max(hi, sp.mapped[j].hi)
		j++
	}
	sp.mapped = slices.Replace(sp.mapped, i, j, span{lo, hi})
}

// ever reports whether iova was mapped at some time.
func (sp *vfioSpace) ever(iova uint64) bool {
	i, _ := slices.BinarySearchFunc(sp.mapped, iova, func(s span, a uint64) int {
		if s.hi <= a {
			return -1
		}
		return 1
	})
	return i < len(sp.mapped) && sp.mapped[i].lo <= iova
}

// WatchVFIO hooks the pack to a VFIO layer: a fault of a device that
// user space owns, at an IOVA its container or IOAS never mapped, is
// then vfio-dma-unmapped (with the user process and its last map calls)
// instead of iommu-fault, and the mappings the layer makes are named by
// its calls (VFIO_IOMMU_MAP_DMA, IOMMU_IOAS_MAP) in other diagnostics.
func (x *Pack) WatchVFIO(v *vfio.VFIO) {
	x.vfioDevs = map[string]*vfioSpace{}
	x.vfioSpaces = map[string]*vfioSpace{}
	v.Hooks.Hook(x.vfioEvent)
}

func (x *Pack) vfioSpace(name, proc string) *vfioSpace {
	sp := x.vfioSpaces[name]
	if sp == nil {
		sp = &vfioSpace{name: name}
		x.vfioSpaces[name] = sp
	}
	if proc != "" {
		sp.proc = proc
	}
	return sp
}

func (x *Pack) vfioEvent(e *vfio.Event) {
	switch e.Op {
	case vfio.OpClaim, vfio.OpAttach:
		x.vfioDevs[e.Device] = x.vfioSpace(e.Space, e.Process)
	case vfio.OpRelease:
		delete(x.vfioDevs, e.Device)
	case vfio.OpMapDMA:
		sp := x.vfioSpace(e.Space, e.Process)
		sp.add(uint64(e.IOVA), uint64(e.IOVA)+e.Size)
		c := call{call: e.Call, t: e.Time, proc: e.Proc}
		sp.recent = append(sp.recent, c)
		if len(sp.recent) > vfioRecent {
			sp.recent = sp.recent[1:]
		}
		if d := x.vfioDomain(e.Unit, e.Domain); d != nil {
			// The domain's maps came first, one per physically
			// contiguous run, back to back from the IOVA.
			for a, end := uint64(e.IOVA), uint64(e.IOVA)+e.Size; a < end; {
				r := d.live.byStart[a]
				if r == nil {
					break
				}
				r.made = c
				a = r.end
			}
		}
	case vfio.OpUnmapDMA:
		// The domain's unmaps came first, each the head of the ring
		// still named after iommu_unmap: in a domain VFIO owns, only
		// its calls unmap.
		if d := x.vfioDomain(e.Unit, e.Domain); d != nil {
			c := call{call: e.Call, t: e.Time, proc: e.Proc}
			d.gone.newest(func(r *rec) bool {
				if r.undone.call != "" || !r.undone.unmap {
					return false
				}
				r.undone = c
				return true
			})
		}
	}
}

// vfioDomain is the state of the unit's domain, if the pack watches the
// unit and the event names one.
func (x *Pack) vfioDomain(unit string, id int) *domainState {
	if id == 0 {
		return nil
	}
	for _, us := range x.units {
		if us.name == unit {
			return us.domain(id)
		}
	}
	return nil
}

// vfioFault reports a fault of a device user space owns at an IOVA its
// space never mapped; false when it is not one.
func (x *Pack) vfioFault(us *unitState, e *iommu.Event) bool {
	sp := x.vfioDevs[e.Device]
	if sp == nil || sp.ever(uint64(e.IOVA)) {
		return false
	}
	msg := fmt.Sprintf("%s, assigned to user space (%s of %s), %s %v, which %s never mapped: blocked by %s domain %d, no byte changed",
		e.Device, sp.name, sp.proc, verb(e.Write), e.IOVA, sp.name, us.name, e.Domain)
	if len(sp.mapped) == 0 {
		msg += "; it maps nothing yet"
	} else {
		var rs []string
		for _, s := range sp.mapped[:min(len(sp.mapped), 4)] {
			rs = append(rs, fmt.Sprintf("%v +%#x", mem.DMAAddr(s.lo), s.hi-s.lo))
		}
		if len(sp.mapped) > 4 {
			rs = append(rs, "...")
		}
		msg += "; it has mapped " + strings.Join(rs, ", ")
	}
	var orig []string
	for i := len(sp.recent) - 1; i >= 0; i-- {
		c := sp.recent[i]
		orig = append(orig, check.Origin(c.call, c.t, c.proc))
	}
	x.chk.Record(classes[cVFIO], check.Diagnostic{
		Time: e.Time, Proc: sp.proc, Device: e.Device, Buffer: e.IOVA.String(), Message: msg, Origin: strings.Join(orig, "; "),
	})
	return true
}
