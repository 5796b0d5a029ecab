package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/scenario"
)

func init() {
	register(&command{name: "list", summary: "list the scenarios and platform presets", run: runList})
}

func runList(e *env, args []string) int {
	fs := newFlags(e, "list", "list", "Lists the built-in scenarios and the embedded platform presets.")
	pos, code, stop := parseArgs(e, fs, args)
	if stop {
		return code
	}
	if len(pos) > 0 {
		return usageError(e, "list", "takes no arguments, got %q", pos)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "Scenarios (dmalab run NAME):")
	for _, s := range scenario.All() {
		def := ""
		if s.Name == scenario.Default {
			def = " (default)"
		}
		fmt.Fprintf(tw, "  %s\t%s%s\n", s.Name, s.Summary, def)
	}
	fmt.Fprintln(tw, "\nPlatforms (--platform NAME, or a YAML file):")
	for _, name := range platform.Presets() {
		spec, err := platform.Preset(name)
		if err != nil {
			fmt.Fprintf(e.stderr, "dmalab list: preset %s: %v\n", name, err)
			return exitFindings
		}
		fmt.Fprintf(tw, "  %s\t%s\n", name, spec.Description)
	}
	tw.Flush()
	return exitOK
}
