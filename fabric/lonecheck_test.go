package fabric

import "testing"

// loneChangesByMembers is what loneChanges answers, from the resources'
// members: each started flow's group alone on its resources, and every
// changed resource's members with flows one group alone on its
// resources (started, or not: loneExtras). It marks nothing (a map of
// the groups it found alone), so that loneChanges can run after it on
// the same state.
func loneChangesByMembers(f *Fabric) bool {
	lone := map[*group]bool{}
	alone := func(g *group) bool {
		for _, ld := range g.loads {
			for _, m := range f.res[ld.r].members {
				if m != g && m.n > 0 {
					return false
				}
			}
		}
		return true
	}
	for _, fl := range f.startedFlows {
		g := fl.g
		if fl.state != flowActive || lone[g] {
			continue
		}
		if !alone(g) {
			return false
		}
		lone[g] = true
	}
	for _, r := range f.changedRes {
		for _, m := range f.res[r].members {
			if m.n > 0 && !lone[m] {
				if !loneExtrasOn || !alone(m) {
					return false
				}
				lone[m] = true
			}
		}
	}
	return len(lone) == len(f.groups) || !f.withinAll()
}

// componentOrder is the resources that component discovers from the
// changed resources (purged) and the started flows, in its order; every
// group found alone, it stops after the changed resources.
func componentOrder(f *Fabric) []int32 {
	var comp []int32
	seen, marked := map[int32]bool{}, map[*group]bool{}
	add := func(g *group) {
		marked[g] = true
		for _, ld := range g.loads {
			if !seen[ld.r] {
				seen[ld.r] = true
				comp = append(comp, ld.r)
			}
		}
	}
	for _, r := range f.changedRes {
		seen[r] = true
		comp = append(comp, r)
	}
	nchanged := len(comp)
	for _, fl := range f.startedFlows {
		if fl.state == flowActive && !marked[fl.g] {
			add(fl.g)
		}
	}
	for i := 0; i < len(comp); i++ {
		if len(marked) == len(f.groups) && i >= nchanged {
			break
		}
		for _, g := range f.res[comp[i]].members {
			if g.n > 0 && !marked[g] {
				add(g)
			}
		}
	}
	return comp
}

// TestLoneChangesByCounts: loneChanges, which reads the resources'
// counts of loads, answers at every recompute what the members say
// (loneChangesByMembers), over the random runs of TestLoneSameRun
// (hooked and not, grouped and not, batches split), both ways many
// times; and where shareLone makes the component that holds every
// group, it is component's, in component's order (componentOrder).
func TestLoneChangesByCounts(t *testing.T) {
	defer func(g int) { loneChangesRef, allResRef, groupMin = nil, nil, g }(groupMin)
	allResRef = componentOrder
	var yes, no int
	loneChangesRef = func(f *Fabric) bool {
		ok := loneChangesByMembers(f)
		if ok {
			yes++
		} else {
			no++
		}
		return ok
	}
	for seed := range uint64(120) {
		groupMin = 256
		if seed%3 == 2 {
			groupMin = 3
		}
		loneRun(t, seed, seed%2 == 1)
	}
	if yes < 20000 || no < 5000 {
		t.Errorf("lone %d times, not %d: too few of either to compare", yes, no)
	}
	t.Logf("lone %d times, not %d", yes, no)
}

// TestShortcutsSameRun: the fields that Start and join leave as a
// released flow or a freed group holds them (not cleared, as they once
// were), and a batch's ending members taken at once rather than popped
// one by one, change nothing a run shows, bit for bit, over the random
// runs of TestLoneSameRun (hooked and not, grouped and not, batches
// split); and every freed group and released flow holds what Start and
// join count on (checkFreed).
func TestShortcutsSameRun(t *testing.T) {
	defer func(g int) {
		resetGroups, resetFlows, wholeBatches, checkFreed, groupMin = false, false, true, false, g
	}(groupMin)
	checkFreed = true
	for seed := range uint64(120) {
		hooked := seed%2 == 1
		groupMin = 256
		if seed%3 == 2 {
			groupMin = 3
		}
		resetGroups, resetFlows, wholeBatches = true, true, false
		want, _, _ := loneRun(t, seed, hooked)
		resetGroups, resetFlows, wholeBatches = false, false, true
		got, _, _ := loneRun(t, seed, hooked)
		if got != want {
			t.Fatalf("seed %d (hooked %v, groupMin %d): %s, without the shortcuts %s", seed, hooked, groupMin, got, want)
		}
	}
}
