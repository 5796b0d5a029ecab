package cli

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// shellDmalab finds the dmalab command lines in a shell script or a
// container's command: each from "dmalab " to the end of its line, an
// "&&" or a closing double quote.
func shellDmalab(script string) []string {
	var out []string
	for _, line := range strings.Split(script, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		for _, m := range regexp.MustCompile(`dmalab (run|merge) [^"]*`).FindAllString(line, -1) {
			for _, c := range strings.Split(m, "&&") {
				out = append(out, strings.TrimSpace(c))
			}
		}
	}
	return out
}

// runShellDmalab runs one such line through the real CLI as sh would:
// the variables substituted, "*" expanded, "> FILE" written. It returns
// its output.
func runShellDmalab(t *testing.T, line string, vars map[string]string) string {
	t.Helper()
	for k, v := range vars {
		line = strings.ReplaceAll(line, "$"+k, v)
	}
	if strings.ContainsAny(line, "$'\"|;`") {
		t.Fatalf("%q: shell syntax the test does not interpret", line)
	}
	cmd, file, redirect := strings.Cut(line, ">")
	var args []string
	for _, a := range strings.Fields(cmd)[1:] {
		if strings.Contains(a, "*") {
			m, err := filepath.Glob(a)
			if err != nil || len(m) == 0 {
				t.Fatalf("%q: %s matches nothing", line, a)
			}
			args = append(args, m...)
			continue
		}
		args = append(args, a)
	}
	code, stdout, stderr := dmalab(t, args...)
	if code != exitOK {
		t.Fatalf("%q: exit %d: %s", line, code, stderr)
	}
	if redirect {
		if err := os.WriteFile(strings.TrimSpace(file), []byte(stdout), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return stdout
}

// wholeSweep is the output of a shard's command line without its --shard:
// what the merge must reproduce.
func wholeSweep(t *testing.T, shardLine string) string {
	t.Helper()
	cmd, _, _ := strings.Cut(shardLine, ">")
	cmd = regexp.MustCompile(` --shard \S+`).ReplaceAllString(cmd, "")
	return runShellDmalab(t, cmd, nil)
}

// TestSlurmExample runs docs/examples/slurm-sweep.sbatch's commands as
// its array tasks and merge job would, through the real CLI.
func TestSlurmExample(t *testing.T) {
	b, err := os.ReadFile("../docs/examples/slurm-sweep.sbatch")
	if err != nil {
		t.Fatal(err)
	}
	script := string(b)
	n := regexp.MustCompile(`(?m)^N=(\d+)$`).FindStringSubmatch(script)
	arr := regexp.MustCompile(`(?m)^#SBATCH --array=0-(\d+)$`).FindStringSubmatch(script)
	if n == nil || arr == nil {
		t.Fatalf("want N=... and #SBATCH --array=0-...; got %v, %v", n, arr)
	}
	count, _ := strconv.Atoi(n[1])
	if last, _ := strconv.Atoi(arr[1]); last != count-1 {
		t.Fatalf("--array=0-%d runs %d tasks, but N=%d", last, last+1, count)
	}
	if !strings.Contains(script, "--dependency=afterok:$SLURM_ARRAY_JOB_ID") {
		t.Error("the merge job does not wait for the whole array (afterok:$SLURM_ARRAY_JOB_ID)")
	}
	cmds := shellDmalab(script)
	if len(cmds) != 3 || !strings.Contains(cmds[0], "--shard $SLURM_ARRAY_TASK_ID/$N") || !strings.HasPrefix(cmds[1], "dmalab merge") {
		t.Fatalf("want a shard's run and the merges; got %q", cmds)
	}
	whole := wholeSweep(t, cmds[0])
	t.Chdir(t.TempDir())
	for i := range count {
		runShellDmalab(t, cmds[0], map[string]string{"SLURM_ARRAY_TASK_ID": strconv.Itoa(i), "N": n[1]})
	}
	for _, c := range cmds[1:] {
		runShellDmalab(t, c, nil)
	}
	got, err := os.ReadFile("sweep.json")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != whole {
		t.Errorf("the merged shards differ from the whole sweep")
	}
}

// k8sObject is what the test reads of a Kubernetes object.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec struct {
		CompletionMode string `yaml:"completionMode"`
		Completions    int    `yaml:"completions"`
		Parallelism    int    `yaml:"parallelism"`
		Template       struct {
			Spec struct {
				RestartPolicy string `yaml:"restartPolicy"`
				Containers    []struct {
					Command      []string `yaml:"command"`
					VolumeMounts []struct {
						Name      string `yaml:"name"`
						MountPath string `yaml:"mountPath"`
					} `yaml:"volumeMounts"`
				} `yaml:"containers"`
				Volumes []struct {
					Name string `yaml:"name"`
					PVC  struct {
						ClaimName string `yaml:"claimName"`
					} `yaml:"persistentVolumeClaim"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// TestKubernetesExample checks docs/examples/k8s-sweep-job.yaml's Indexed
// Job and merge Job, and runs their commands through the real CLI.
func TestKubernetesExample(t *testing.T) {
	f, err := os.Open("../docs/examples/k8s-sweep-job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	objs := map[string]k8sObject{}
	var pvc string
	for {
		var o k8sObject
		if err := dec.Decode(&o); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		switch o.Kind {
		case "Job":
			objs[o.Metadata.Labels["step"]] = o
		case "PersistentVolumeClaim":
			pvc = o.Metadata.Name
			if o.Metadata.Labels["step"] != "shards" {
				t.Errorf("the volume is not applied with the shards (label step=%q)", o.Metadata.Labels["step"])
			}
		}
	}
	shards, merge := objs["shards"], objs["merge"]
	if shards.Spec.CompletionMode != "Indexed" || shards.Spec.Parallelism < 1 || shards.Spec.Parallelism > shards.Spec.Completions {
		t.Fatalf("shards' Job: completionMode %q, completions %d, parallelism %d; want Indexed, N, 1 to N",
			shards.Spec.CompletionMode, shards.Spec.Completions, shards.Spec.Parallelism)
	}
	var lines []string
	for _, j := range []k8sObject{shards, merge} {
		s := j.Spec.Template.Spec
		if s.RestartPolicy != "Never" && s.RestartPolicy != "OnFailure" || len(s.Containers) != 1 {
			t.Fatalf("Job %s: restartPolicy %q, %d containers", j.Metadata.Name, s.RestartPolicy, len(s.Containers))
		}
		c := s.Containers[0]
		if len(c.Command) != 3 || c.Command[0] != "sh" || len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/out" ||
			len(s.Volumes) != 1 || s.Volumes[0].PVC.ClaimName != pvc || pvc == "" {
			t.Fatalf("Job %s: want sh -c with the volume %q on /out; got %q, %+v, %+v", j.Metadata.Name, pvc, c.Command, c.VolumeMounts, s.Volumes)
		}
		lines = append(lines, shellDmalab(c.Command[2])...)
	}
	want := "--shard $JOB_COMPLETION_INDEX/" + strconv.Itoa(shards.Spec.Completions) + " "
	if len(lines) != 3 || !strings.Contains(lines[0], want) || !slices.ContainsFunc(lines[1:], func(l string) bool { return strings.Contains(l, "--json > /out/sweep.json") }) {
		t.Fatalf("want a shard's run with %q and the merges; got %q", want, lines)
	}
	whole := wholeSweep(t, lines[0])
	t.Chdir(t.TempDir())
	for i := range shards.Spec.Completions {
		runShellDmalab(t, strings.ReplaceAll(lines[0], "/out/", ""), map[string]string{"JOB_COMPLETION_INDEX": strconv.Itoa(i)})
	}
	var text string
	for _, l := range lines[1:] {
		text = runShellDmalab(t, strings.ReplaceAll(l, "/out/", ""), nil)
	}
	got, err := os.ReadFile("sweep.json")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != whole || !strings.HasPrefix(text, "sweep of transfers: 9 points") {
		t.Errorf("the merged shards differ from the whole sweep, or the log lacks its table:\n%s", text)
	}
}
