package scenario

import (
	"errors"
	"io"
	"testing"

	"github.com/dmalab/dmalab/report"
)

// FuzzSets feeds arbitrary --set assignments to a run: it must either
// succeed or fail with a usage error, never panic, hang or fail as a
// model error.
func FuzzSets(f *testing.F) {
	for _, s := range []string{
		"sizes=4KiB,1GiB", "sizes=9223372036854775807B", "sizes=1PiB", "paths=peer", "paths=pinned,device",
		"directions=bidir", "gpu=0", "gpu=99", "node=0", "node=gpu", "seed=7", "peer=0",
		"platform.gpus.gpu0.link.gen=1", "platform.gpus.gpu0.copy_engines=1", "platform.fabric.cross_traffic=0.5",
		"platform.nodes.0.dram_bandwidth=1 GB/s", "=", "sizes=", "x",
	} {
		f.Add(s, "sizes=8B,1MiB")
	}
	s, err := Lookup("transfers")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		// The mapped and managed paths work page by page, as the driver
		// does, so their cost grows with the memory they may use: cap the
		// default platform's memories (last, so the fuzzed assignments
		// cannot lift the cap) to keep every input well inside the
		// fuzzer's hang limit.
		caps := []string{"platform.nodes.0.dram=4GiB", "platform.gpus.gpu0.vram=4GiB"}
		out, err := Run(s, Options{Sets: append([]string{a, b}, caps...), Trace: true})
		if err != nil && !errors.Is(err, ErrUsage) {
			t.Fatalf("--set %q --set %q: %v (want success or a usage error)", a, b, err)
		}
		if err != nil {
			return
		}
		// What a run produces, every writer the CLI uses must take.
		for name, write := range map[string]func(io.Writer) error{
			"table": func(w io.Writer) error { return report.WriteTable(w, out.Result) },
			"json":  func(w io.Writer) error { return report.WriteJSON(w, out.Result) },
			"trace": out.Trace.Write,
		} {
			if err := write(io.Discard); err != nil {
				t.Fatalf("--set %q --set %q: writing the %s: %v", a, b, name, err)
			}
		}
	})
}
