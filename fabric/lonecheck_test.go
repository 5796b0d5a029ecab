package fabric

import "testing"

// loneChangesByMembers is loneChanges as it first was: each started
// flow's group alone on its resources by their members, and every
// changed resource's members with flows among those groups. It marks
// nothing (a map of the groups it found alone), so that loneChanges
// can run after it on the same state.
func loneChangesByMembers(f *Fabric) bool {
	lone := map[*group]bool{}
	n := 0
	for _, fl := range f.startedFlows {
		g := fl.g
		if fl.state != flowActive || lone[g] {
			continue
		}
		for _, ld := range g.loads {
			for _, m := range f.res[ld.r].members {
				if m != g && m.n > 0 {
					return false
				}
			}
		}
		lone[g] = true
		n++
	}
	for _, r := range f.changedRes {
		for _, m := range f.res[r].members {
			if m.n > 0 && !lone[m] {
				return false
			}
		}
	}
	return n == len(f.groups) || !f.withinAll()
}

// TestLoneChangesByCounts: loneChanges, which reads the resources'
// counts of loads, answers at every recompute what the members say
// (loneChangesByMembers), over the random runs of TestLoneSameRun
// (hooked and not, grouped and not, batches split), both ways many
// times.
func TestLoneChangesByCounts(t *testing.T) {
	defer func(g int) { loneChangesRef, groupMin = nil, g }(groupMin)
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
