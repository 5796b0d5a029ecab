package platform

import (
	"slices"
	"strings"
	"testing"
)

// nicFns is base with a root port below which a two-function NIC sits;
// extra is added to the second function.
func nicFns(first, second string) string {
	return base + `devices:
  - name: nic0
    kind: nic
    parent: rc0
    link: {gen: 5, width: 16, efficiency: 0.9}
    dma_engines: 1
` + first + `  - name: nic1
    kind: nic
    parent: rc0
    link: {gen: 5, width: 16, efficiency: 0.9}
    dma_engines: 1
` + second
}

// TestFunctions: slot, function, acs and dma_aliases parse; misuse is an
// error at its file:line; a file without them parses as before.
func TestFunctions(t *testing.T) {
	ok0 := "    slot: cx7\n    function: 0\n"
	ok1 := "    slot: cx7\n    function: 1\n"
	tests := []struct {
		name          string
		first, second string
		err           string // empty: valid
	}{
		{"no slots", "", "", ""},
		{"two functions", ok0, ok1, ""},
		{"with acs and an alias", ok0 + "    acs: true\n    dma_aliases: [1]\n", ok1 + "    acs: true\n", ""},
		{"alias of a phantom function", ok0 + "    dma_aliases: [2, 3]\n", ok1, ""},
		{"function without slot", "    function: 1\n", "", "t.yaml:26: devices[0].function: a function number needs slot"},
		{"function 0 without slot", "    function: 0\n", "", "t.yaml:26: devices[0].function: a function number needs slot"},
		{"acs without slot", "    acs: true\n", "", "t.yaml:26: devices[0].acs: acs here is a function's own"},
		{"aliases without slot", "    dma_aliases: [1]\n", "", "t.yaml:26: devices[0].dma_aliases: DMA aliases name other functions"},
		{"function 8", ok0, "    slot: cx7\n    function: 8\n", "t.yaml:34: devices[1].function: want 0..7 (PCI_FUNC: 3 bits), got 8"},
		{"same function twice", ok0, ok0, `t.yaml:34: devices[1].function: function 0 of slot "cx7" is already nic0 (devices[0].name, line 21)`},
		{"no function 0", "    slot: cx7\n    function: 2\n", ok1, `t.yaml:26: devices[0].slot: slot "cx7" has no function 0`},
		{"bad slot", "    slot: \"a b\"\n", "", `t.yaml:26: devices[0].slot: bad slot "a b"`},
		{"alias of itself", ok0 + "    dma_aliases: [0]\n", ok1, "t.yaml:28: devices[0].dma_aliases[0]: function 0 is the device itself"},
		{"alias twice", ok0 + "    dma_aliases: [1, 1]\n", ok1, "t.yaml:28: devices[0].dma_aliases[1]: function 1 listed twice"},
		{"alias 9", ok0 + "    dma_aliases: [9]\n", ok1, "t.yaml:28: devices[0].dma_aliases[0]: want a function number 0..7, got 9"},
		{"function not a number", "    slot: cx7\n    function: one\n", "", "t.yaml:27: devices[0].function:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse("t.yaml", []byte(nicFns(tt.first, tt.second)))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out := roundTrip(t, s); strings.Contains(tt.first+tt.second, "slot") != strings.Contains(out, "slot:") {
				t.Errorf("slot in the input %v, in Marshal's output %v:\n%s", strings.Contains(tt.first+tt.second, "slot"), strings.Contains(out, "slot:"), out)
			}
		})
	}
}

// TestFunctionsParent: the functions of one slot are below one parent.
func TestFunctionsParent(t *testing.T) {
	doc := nicFns("    slot: cx7\n    function: 0\n", "    slot: cx7\n    function: 1\n")
	doc = strings.Replace(doc, "  - name: rc0\n    node: 0\n", "  - name: rc0\n    node: 0\n  - name: rc1\n    node: 0\n", 1)
	doc = strings.Replace(doc, "    parent: rc0\n    link: {gen: 5, width: 16, efficiency: 0.9}\n    dma_engines: 1\n    slot: cx7\n    function: 1\n",
		"    parent: rc1\n    link: {gen: 5, width: 16, efficiency: 0.9}\n    dma_engines: 1\n    slot: cx7\n    function: 1\n", 1)
	_, err := Parse("t.yaml", []byte(doc))
	if err == nil || !strings.Contains(err.Error(), `devices[1].parent: "rc1": slot "cx7" is below "rc0" (devices[0].parent, line`) {
		t.Fatalf("err %v, want the functions' parents to differ", err)
	}
}

// TestFunctionsClone: Clone copies a device's aliases, so editing the
// copy leaves the original alone.
func TestFunctionsClone(t *testing.T) {
	s, err := Parse("t.yaml", []byte(nicFns("    slot: cx7\n    function: 0\n    dma_aliases: [1]\n", "    slot: cx7\n    function: 1\n")))
	if err != nil {
		t.Fatal(err)
	}
	c := s.Clone()
	c.Devices[0].DMAAliases[0] = 2
	if !slices.Equal(s.Devices[0].DMAAliases, []int{1}) {
		t.Errorf("Clone shares DMAAliases: original now %v", s.Devices[0].DMAAliases)
	}
}
