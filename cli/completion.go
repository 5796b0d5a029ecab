package cli

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/scenario"
)

func init() {
	register(&command{name: "completion", summary: "print a shell completion script (bash, zsh or fish)", run: runCompletion})
}

func runCompletion(e *env, args []string) int {
	fs := newFlags(e, "completion", "completion bash|zsh|fish",
		`Prints a script that completes dmalab's commands, their flags, scenario
names and platform presets in the shell named. Load it from the shell's
start-up file:

  bash:  source <(dmalab completion bash)
  zsh:   source <(dmalab completion zsh)
  fish:  dmalab completion fish | source`)
	pos, code, stop := parseArgs(e, fs, args)
	if stop {
		return code
	}
	if len(pos) != 1 {
		return usageError(e, "completion", "want one shell (bash, zsh or fish), got %d arguments", len(pos))
	}
	w := completionWords()
	switch pos[0] {
	case "bash":
		writeBashCompletion(e.stdout, w)
	case "zsh":
		// zsh runs bash completion functions through bashcompinit.
		fmt.Fprintln(e.stdout, "#compdef dmalab\nautoload -U +X bashcompinit && bashcompinit")
		writeBashCompletion(e.stdout, w)
	case "fish":
		writeFishCompletion(e.stdout, w)
	default:
		return usageError(e, "completion", "unknown shell %q (bash, zsh or fish)", pos[0])
	}
	return exitOK
}

// words is what completion offers: the commands with their flags, what
// their positional arguments may be, the scenarios and the presets.
type words struct {
	commands  []string
	flags     map[string][]string
	args      map[string][]string
	scenarios []string
	presets   []string
}

var flagLine = regexp.MustCompile(`(?m)^  (--?[a-z0-9][a-z0-9-]*)`)

// completionWords collects the words from the commands themselves: each
// command's flags are those its --help lists, so the script follows the
// commands without a second list to keep.
func completionWords() words {
	w := words{flags: map[string][]string{}, args: map[string][]string{}}
	for name := range commands {
		w.commands = append(w.commands, name)
	}
	slices.Sort(w.commands)
	for _, s := range scenario.All() {
		w.scenarios = append(w.scenarios, s.Name)
	}
	w.presets = platform.Presets()
	for _, name := range w.commands {
		var out bytes.Buffer
		commands[name].run(&env{stdout: &out, stderr: io.Discard}, []string{"--help"})
		for _, m := range flagLine.FindAllStringSubmatch(out.String(), -1) {
			if !slices.Contains(w.flags[name], m[1]) {
				w.flags[name] = append(w.flags[name], m[1])
			}
		}
		w.flags[name] = append(w.flags[name], "--help")
	}
	w.args["run"] = w.scenarios
	w.args["check"] = w.scenarios
	w.args["platform"] = append([]string{"show", "numa", "check", "list", "from-topo"}, w.presets...)
	w.args["completion"] = []string{"bash", "zsh", "fish"}
	w.args["help"] = w.commands
	return w
}

func writeBashCompletion(out io.Writer, w words) {
	fmt.Fprintf(out, `# bash completion for dmalab (dmalab completion bash)
_dmalab() {
    local cur prev cmd flags args
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev="${COMP_WORDS[COMP_CWORD-1]}"
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=( $(compgen -W %q -- "$cur") )
        return
    fi
    case "$prev" in
        --platform)
            COMPREPLY=( $(compgen -W %q -- "$cur") $(compgen -f -- "$cur") )
            return ;;
        --trace|--html|-o|--probe)
            COMPREPLY=( $(compgen -f -- "$cur") )
            return ;;
    esac
    cmd="${COMP_WORDS[1]}"
    case "$cmd" in
`, strings.Join(append(slices.Clone(w.commands), "--help", "--version"), " "), strings.Join(w.presets, " "))
	for _, c := range w.commands {
		fmt.Fprintf(out, "        %s) flags=%q; args=%q ;;\n", c, strings.Join(w.flags[c], " "), strings.Join(w.args[c], " "))
	}
	fmt.Fprintf(out, `        -*) flags=%q; args="" ;;
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=( $(compgen -W "$flags" -- "$cur") )
    else
        COMPREPLY=( $(compgen -W "$args" -- "$cur") $(compgen -f -- "$cur") )
    fi
}
complete -F _dmalab dmalab
`, strings.Join(w.flags["run"], " "))
}

func writeFishCompletion(out io.Writer, w words) {
	fmt.Fprintln(out, "# fish completion for dmalab (dmalab completion fish)")
	fmt.Fprintf(out, "complete -c dmalab -f -n __fish_use_subcommand -a %q\n", strings.Join(w.commands, " "))
	fmt.Fprintln(out, "complete -c dmalab -n __fish_use_subcommand -l version -d 'print the version'")
	for _, c := range w.commands {
		for _, f := range w.flags[c] {
			opt := "-l " + strings.TrimPrefix(f, "--")
			if !strings.HasPrefix(f, "--") {
				opt = "-s " + strings.TrimPrefix(f, "-")
			}
			fmt.Fprintf(out, "complete -c dmalab -n '__fish_seen_subcommand_from %s' %s\n", c, opt)
		}
		if a := w.args[c]; len(a) > 0 {
			fmt.Fprintf(out, "complete -c dmalab -f -n '__fish_seen_subcommand_from %s' -a %q\n", c, strings.Join(a, " "))
		}
	}
	fmt.Fprintf(out, "complete -c dmalab -n '__fish_seen_subcommand_from run check' -l platform -r -a %q\n", strings.Join(w.presets, " "))
}
