package scenario

import (
	"bytes"
	"strings"
	"testing"
)

// TestTransfersThroughTheDMALayer: the transfers scenario's copies are
// transfers of the DMA layer (so the checker and statistics see them),
// and a copy within the GPU runs on the engine every other part of the
// model gives device-to-device copies (the third), not the first.
func TestTransfersThroughTheDMALayer(t *testing.T) {
	s, err := Lookup("transfers")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Run(s, Options{
		Sets:        []string{"sizes=1MiB", "paths=pinned,device", "directions=h2d,d2d"},
		Trace:       true,
		Attribution: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if ts := out.Result.Time; ts == nil || ts.Transfers != 2 {
		t.Fatalf("time split %+v, want the 2 copies as transfers of the DMA layer", ts)
	}
	var b bytes.Buffer
	if err := out.Trace.Write(&b); err != nil {
		t.Fatal(err)
	}
	tr := b.String()
	for _, track := range []string{`"gpu0.ce0"`, `"gpu0.ce2"`} {
		if !strings.Contains(tr, track) {
			t.Errorf("trace has no track %s: the copies did not go through the DMA layer's engines", track)
		}
	}
}
