package cli

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/dmalab/dmalab/report"
)

func init() {
	register(&command{name: "merge", summary: "join the shards of a sweep (run --sweep --shard I/N --json) into one document", run: runMerge})
}

func runMerge(e *env, args []string) int {
	fs := newFlags(e, "merge", "merge SHARD.json... [--json]",
		`Joins the documents of a sweep's shards ("dmalab run --sweep ... --shard I/N
--json", one per I from 0 to N-1, in any order) into what the whole sweep
prints: with --json the sweep document, byte for byte the one
"dmalab run --sweep ... --json" writes; without, its table.

Every shard must be there once, and all of one sweep: the same scenario,
platform, --set, --sweep and number of shards. Anything else is an error
(exit 2) that names the file.`)
	asJSON := fs.Bool("json", false, "print the merged sweep document instead of its table")
	files, code, stop := parseArgs(e, fs, args)
	if stop {
		return code
	}
	if len(files) == 0 {
		return usageError(e, "merge", "want the shards' files (dmalab run --sweep ... --shard I/N --json > FILE)")
	}
	doc, err := mergeShards(files)
	if err != nil {
		return usageError(e, "merge", "%v", err)
	}
	return writeSweep(e, "merge", doc, *asJSON)
}

// mergeShards reads the shards' files and joins them, checking that they
// are the shards of one sweep, each once, each holding its points.
func mergeShards(files []string) (*report.Sweep, error) {
	var (
		first  *report.Sweep
		merged []report.SweepPoint
	)
	byIndex := map[int]string{}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		doc, err := report.ReadSweep(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
		sh := doc.Shard
		if sh == nil {
			return nil, fmt.Errorf("%s: not a shard (no \"shard\": a whole sweep, written without --shard)", name)
		}
		if first == nil {
			first = doc
			if sh.Count < 1 || doc.Sweep.Points != doc.Sweep.Size() {
				return nil, fmt.Errorf("%s: inconsistent sweep (%d shards, %d points of %d)", name, sh.Count, doc.Sweep.Points, doc.Sweep.Size())
			}
		} else {
			if !report.SameSweep(&first.Sweep, &doc.Sweep) {
				return nil, fmt.Errorf("%s: a shard of another sweep than %s (%s)", name, files[0], sweepDiff(&first.Sweep, &doc.Sweep))
			}
			if sh.Count != first.Shard.Count {
				return nil, fmt.Errorf("%s: shard %d/%d, but %s is one of %d shards", name, sh.Index, sh.Count, files[0], first.Shard.Count)
			}
		}
		if sh.Index < 0 || sh.Index >= sh.Count {
			return nil, fmt.Errorf("%s: shard %d/%d does not exist", name, sh.Index, sh.Count)
		}
		if other, dup := byIndex[sh.Index]; dup {
			return nil, fmt.Errorf("%s: shard %d/%d again (%s is that shard too)", name, sh.Index, sh.Count, other)
		}
		byIndex[sh.Index] = name
		// The shard holds exactly its points, in order.
		var want []int
		for p := range doc.Sweep.Points {
			if report.InShard(p, sh.Index, sh.Count) {
				want = append(want, p)
			}
		}
		var got []int
		for _, p := range doc.Points {
			got = append(got, p.Index)
		}
		if !slices.Equal(got, want) {
			return nil, fmt.Errorf("%s: shard %d/%d holds the points of index %v, want %v", name, sh.Index, sh.Count, got, want)
		}
		merged = append(merged, doc.Points...)
	}
	var missing []string
	for i := range first.Shard.Count {
		if _, ok := byIndex[i]; !ok {
			missing = append(missing, fmt.Sprintf("%d/%d", i, first.Shard.Count))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("shard(s) %s missing (given: %s)", strings.Join(missing, ", "), strings.Join(files, ", "))
	}
	slices.SortFunc(merged, func(a, b report.SweepPoint) int { return a.Index - b.Index })
	return &report.Sweep{Sweep: first.Sweep, Points: merged}, nil
}

// sweepDiff says the first field in which two sweeps' definitions differ.
func sweepDiff(a, b *report.SweepDef) string {
	switch {
	case a.Command != b.Command:
		return fmt.Sprintf("command %q, not %q", b.Command, a.Command)
	case a.Scenario != b.Scenario:
		return fmt.Sprintf("scenario %q, not %q", b.Scenario, a.Scenario)
	case a.Platform != b.Platform:
		return fmt.Sprintf("platform %q, not %q", b.Platform, a.Platform)
	case !slices.Equal(a.Sets, b.Sets):
		return fmt.Sprintf("--set %q, not %q", b.Sets, a.Sets)
	case a.NUMACtl != b.NUMACtl:
		return fmt.Sprintf("--numactl %q, not %q", b.NUMACtl, a.NUMACtl)
	case a.Attribution != b.Attribution:
		return fmt.Sprintf("--attribution %v, not %v", b.Attribution, a.Attribution)
	}
	return "its --sweep axes differ"
}
