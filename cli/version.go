package cli

import (
	"fmt"
	"io"
	"runtime/debug"
)

func init() {
	register(&command{name: "version", summary: "print dmalab's version and the revision it was built from", run: runVersion})
}

func runVersion(e *env, args []string) int {
	fs := newFlags(e, "version", "version", `Prints the module version and, when the binary was built from a git
checkout, the VCS revision, its time and whether the tree was modified
(runtime/debug.ReadBuildInfo). "dmalab --version" prints the same.`)
	pos, code, stop := parseArgs(e, fs, args)
	if stop {
		return code
	}
	if len(pos) > 0 {
		return usageError(e, "version", "takes no arguments, got %q", pos)
	}
	writeVersion(e.stdout)
	return exitOK
}

// writeVersion writes what the build info knows: "go run" and "go test"
// builds have no VCS stamp, and a module built from its source tree is
// "(devel)".
func writeVersion(w io.Writer) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		fmt.Fprintln(w, "dmalab (no build information)")
		return
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	fmt.Fprintf(w, "dmalab %s\n", v)
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if r := settings["vcs.revision"]; r != "" {
		fmt.Fprintf(w, "revision %s", r)
		if t := settings["vcs.time"]; t != "" {
			fmt.Fprintf(w, " (%s)", t)
		}
		if settings["vcs.modified"] == "true" {
			fmt.Fprint(w, ", modified")
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%s %s\n", bi.GoVersion, bi.Path)
}
