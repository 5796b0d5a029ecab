package platform

import (
	"testing"
)

// TestFabricSharing reads fabric.sharing and fabric.weight_s into the
// weight-S the fabric uses: 0 (plain max-min) unless sharing is lv08,
// then weight_s or SimGrid's 20537.
func TestFabricSharing(t *testing.T) {
	for _, tc := range []struct {
		name, fabric string
		want         float64
	}{
		{"absent", "", 0},
		{"max-min", "fabric: {sharing: max-min}\n", 0},
		{"lv08", "fabric: {sharing: lv08}\n", DefaultWeightS},
		{"lv08 with weight_s", "fabric: {sharing: lv08, weight_s: 1000}\n", 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse("t.yaml", []byte(base+tc.fabric))
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Fabric.LV08WeightS(); got != tc.want {
				t.Errorf("LV08WeightS = %v, want %v", got, tc.want)
			}
		})
	}
}
