package scenario

import (
	"errors"
	"testing"
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
		_, err := Run(s, Options{Sets: []string{a, b}})
		if err != nil && !errors.Is(err, ErrUsage) {
			t.Fatalf("--set %q --set %q: %v (want success or a usage error)", a, b, err)
		}
	})
}
