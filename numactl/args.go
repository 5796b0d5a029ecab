package numactl

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Policy is the memory policy numactl's options ask for, named by the
// option that sets it.
type Policy string

// The policies, one per numactl option (numactl.c's long options).
const (
	NoPolicy           Policy = ""                    // no policy option: the default, local allocation
	Interleave         Policy = "interleave"          // --interleave, -i: MPOL_INTERLEAVE
	Preferred          Policy = "preferred"           // --preferred, -p: MPOL_PREFERRED
	PreferredMany      Policy = "preferred-many"      // --preferred-many, -P: MPOL_PREFERRED_MANY
	WeightedInterleave Policy = "weighted-interleave" // --weighted-interleave, -w: MPOL_WEIGHTED_INTERLEAVE
	Membind            Policy = "membind"             // --membind, -m: MPOL_BIND
	LocalAlloc         Policy = "localalloc"          // --localalloc, -l: MPOL_LOCAL
)

// Topology is what numactl resolves node and CPU lists against: the
// machine's node count and CPU count (every node and CPU allowed, as in
// a process outside any cpuset, so "all" and "+" mean all of them).
type Topology struct {
	Nodes, CPUs int
}

// Args are the placement options of a numactl command line: what numactl
// sets in itself (set_mempolicy, sched_setaffinity) before it execs the
// program, which then inherits them.
type Args struct {
	// Policy is the memory policy; Nodes its nodes (none for
	// LocalAlloc and NoPolicy).
	Policy Policy
	Nodes  []int
	// CPUNodes are --cpunodebind's nodes: the program runs on their
	// CPUs. CPUs are --physcpubind's. Of the two, the option given last
	// is set, the other nil; both nil when neither was given.
	CPUNodes []int
	CPUs     []int
}

// ArgError is a numactl command line numactl would refuse: Token is the
// offending argument as given.
type ArgError struct {
	Token  string
	Reason string
}

func (e *ArgError) Error() string { return fmt.Sprintf("numactl %q: %s", e.Token, e.Reason) }

// option is one of numactl's placement options.
type option struct {
	long   string
	short  byte
	policy Policy // the policy it sets; "" for the CPU options
	arg    bool   // takes a node or CPU list
}

var options = []option{
	{"interleave", 'i', Interleave, true},
	{"preferred", 'p', Preferred, true},
	{"preferred-many", 'P', PreferredMany, true},
	{"weighted-interleave", 'w', WeightedInterleave, true},
	{"membind", 'm', Membind, true},
	{"localalloc", 'l', LocalAlloc, false},
	{"cpunodebind", 'N', "", true},
	{"physcpubind", 'C', "", true},
}

// Parse reads numactl's placement options from line (split at white
// space), as numactl(8) parses its command line before the program's
// name: --opt=LIST, --opt LIST, -x LIST and -xLIST. Node lists take
// numactl's syntax (libnuma's numa_parse_nodestring): numbers and ranges
// joined by commas ("0,2-3"), "all", a leading "+" for numbers relative
// to the allowed set, a leading "!" for its inverse, and "same" for the
// previous list of the line. CPU lists (--physcpubind) take the same
// syntax over CPUs. Two policy options conflict, as numactl says; of
// --cpunodebind and --physcpubind the last wins, as numactl applies them
// in order. --preferred takes one node. Any other word is an error
// naming it.
func Parse(line string, top Topology) (Args, error) {
	var a Args
	words := strings.Fields(line)
	var prev []int
	var policyTok string
	for i := 0; i < len(words); i++ {
		w := words[i]
		opt, val, hasVal, err := lookup(w)
		if err != nil {
			return Args{}, err
		}
		tok := w
		if opt.arg && !hasVal {
			if i+1 >= len(words) {
				return Args{}, &ArgError{w, "needs a list"}
			}
			i++
			val = words[i]
			tok = w + " " + val
		} else if !opt.arg && hasVal {
			return Args{}, &ArgError{w, "takes no argument"}
		}
		if opt.policy != "" {
			if a.Policy != NoPolicy {
				return Args{}, &ArgError{tok, "conflicting policies: " + policyTok + " was given"}
			}
			a.Policy, policyTok = opt.policy, tok
		}
		if !opt.arg {
			continue
		}
		limit := top.Nodes
		what := "node"
		if opt.long == "physcpubind" {
			limit, what = top.CPUs, "cpu"
		}
		list, err := parseList(val, limit, what, prev)
		if err != nil {
			return Args{}, &ArgError{tok, err.Error()}
		}
		if len(list) == 0 {
			return Args{}, &ArgError{tok, "empty " + what + " list"}
		}
		prev = list
		switch opt.long {
		case "cpunodebind":
			a.CPUNodes, a.CPUs = list, nil
		case "physcpubind":
			a.CPUNodes, a.CPUs = nil, list
		case "preferred":
			if len(list) != 1 {
				return Args{}, &ArgError{tok, "takes one node"}
			}
			a.Nodes = list
		default:
			a.Nodes = list
		}
	}
	return a, nil
}

// lookup finds the option of word w and its attached value (after "="
// for a long option, the rest of the word for a short one).
func lookup(w string) (option, string, bool, error) {
	switch {
	case strings.HasPrefix(w, "--"):
		name, val, has := strings.Cut(w[2:], "=")
		for _, o := range options {
			if o.long == name {
				return o, val, has, nil
			}
		}
		return option{}, "", false, &ArgError{w, "not a placement option (" + optionNames() + ")"}
	case len(w) >= 2 && w[0] == '-':
		for _, o := range options {
			if o.short == w[1] {
				return o, w[2:], len(w) > 2, nil
			}
		}
		return option{}, "", false, &ArgError{w, "not a placement option (" + optionNames() + ")"}
	}
	return option{}, "", false, &ArgError{w, "not an option: numactl's options here set placement only, no program follows"}
}

func optionNames() string {
	var out []string
	for _, o := range options {
		out = append(out, "--"+o.long)
	}
	return strings.Join(out, ", ")
}

// parseList is numa_parse_nodestring (numa_parse_cpustring for CPUs)
// over limit items 0..limit-1, all of them allowed: "all", "same" (prev),
// "+" relative numbering (the n-th allowed item: with every item
// allowed, n itself, but checked against how many there are), "!" the
// inverse, then numbers and ranges joined by commas.
func parseList(s string, limit int, what string, prev []int) ([]int, error) {
	if s == "same" {
		if prev == nil {
			return nil, fmt.Errorf("\"same\" with no list before it")
		}
		for _, n := range prev {
			if n >= limit {
				return nil, fmt.Errorf("%s %d out of range (%ss %s)", what, n, what, Ranges(seq(limit)))
			}
		}
		return slices.Clone(prev), nil
	}
	invert := strings.HasPrefix(s, "!")
	s = strings.TrimPrefix(s, "!")
	relative := strings.HasPrefix(s, "+")
	s = strings.TrimPrefix(s, "+")
	var set []int
	if s == "all" {
		if relative {
			return nil, fmt.Errorf("\"+all\" is not a list")
		}
		for i := range limit {
			set = append(set, i)
		}
	} else {
		for _, part := range strings.Split(s, ",") {
			lo, hi, isRange := strings.Cut(part, "-")
			a, err := number(lo, limit, what)
			if err != nil {
				return nil, err
			}
			b := a
			if isRange {
				if b, err = number(hi, limit, what); err != nil {
					return nil, err
				}
				if b < a {
					return nil, fmt.Errorf("range %s backwards", part)
				}
			}
			for n := a; n <= b; n++ {
				set = append(set, n)
			}
		}
	}
	slices.Sort(set)
	set = slices.Compact(set)
	if invert {
		var out []int
		for i := range limit {
			if !slices.Contains(set, i) {
				out = append(out, i)
			}
		}
		set = out
	}
	return set, nil
}

// number is one node or CPU number of a list, below limit.
func number(s string, limit int, what string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || s == "" || s[0] == '+' {
		return 0, fmt.Errorf("%q is not a %s number", s, what)
	}
	if n >= limit {
		return 0, fmt.Errorf("%s %d out of range (%ss %s)", what, n, what, Ranges(seq(limit)))
	}
	return n, nil
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// String writes a as a numactl command line's placement options, in a
// fixed order (policy, then CPUs): Parse of it gives a back.
func (a Args) String() string {
	var out []string
	switch a.Policy {
	case NoPolicy:
	case LocalAlloc:
		out = append(out, "--localalloc")
	default:
		out = append(out, "--"+string(a.Policy)+"="+Ranges(a.Nodes))
	}
	switch {
	case a.CPUNodes != nil:
		out = append(out, "--cpunodebind="+Ranges(a.CPUNodes))
	case a.CPUs != nil:
		out = append(out, "--physcpubind="+Ranges(a.CPUs))
	}
	return strings.Join(out, " ")
}
