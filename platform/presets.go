package platform

import (
	"embed"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
)

// The presets are YAML files compiled into the binary, so that the
// default `dmalab run` needs no file; every parameter in them names its
// source.
//
//go:embed presets/*.yaml
var presetFiles embed.FS

type preset struct {
	spec *Spec
	err  error
}

var presets = sync.OnceValue(func() map[string]preset {
	entries, err := presetFiles.ReadDir("presets")
	if err != nil {
		panic("platform: embedded presets: " + err.Error())
	}
	m := map[string]preset{}
	for _, e := range entries {
		file := "presets/" + e.Name()
		data, err := presetFiles.ReadFile(file)
		if err != nil {
			panic("platform: embedded presets: " + err.Error())
		}
		s, err := Parse(file, data)
		m[strings.TrimSuffix(e.Name(), ".yaml")] = preset{s, err}
	}
	return m
})

// Presets returns the names of the built-in platforms, sorted.
func Presets() []string {
	var names []string
	for name := range presets() {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Preset returns a fresh copy of the built-in platform called name.
func Preset(name string) (*Spec, error) {
	p, ok := presets()[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (presets: %s)", ErrUnknownPreset, name, strings.Join(Presets(), ", "))
	}
	if p.err != nil {
		return nil, p.err
	}
	return p.spec.Clone(), nil
}

// PresetYAML returns the text of the built-in platform called name, with
// its comments: a starting point for a file of one's own.
func PresetYAML(name string) ([]byte, error) {
	if _, ok := presets()[name]; !ok {
		return nil, fmt.Errorf("%w %q (presets: %s)", ErrUnknownPreset, name, strings.Join(Presets(), ", "))
	}
	return presetFiles.ReadFile("presets/" + name + ".yaml")
}

// Resolve returns the platform a user named: a preset name, else a file
// when nameOrPath looks like one (it has a path separator or a .yaml or
// .yml extension) or exists; otherwise an error that lists the presets.
func Resolve(nameOrPath string) (*Spec, error) {
	if _, ok := presets()[nameOrPath]; ok {
		return Preset(nameOrPath)
	}
	ext := path.Ext(nameOrPath)
	if strings.ContainsRune(nameOrPath, '/') || strings.ContainsRune(nameOrPath, os.PathSeparator) || ext == ".yaml" || ext == ".yml" {
		return Load(nameOrPath)
	}
	if st, err := os.Stat(nameOrPath); err == nil && !st.IsDir() {
		return Load(nameOrPath)
	}
	return nil, fmt.Errorf("%w %q: not a preset (%s) and no such file", ErrUnknownPreset, nameOrPath, strings.Join(Presets(), ", "))
}
