package html

import (
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/report"
)

// PlatformParams lists every field of spec as dmalab platform show
// writes it, one per line: the --set path (a list's elements by their
// name or id, as --set finds them), the value and its source.
func PlatformParams(spec *platform.Spec) ([]report.PlatformParam, error) {
	text, err := platform.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("platform parameters of %s: %w", spec.Name, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return nil, fmt.Errorf("platform parameters of %s: %w", spec.Name, err)
	}
	var out []report.PlatformParam
	if len(doc.Content) == 1 {
		flatten(doc.Content[0], "", &out)
	}
	return out, nil
}

func join(path, seg string) string {
	if path == "" {
		return seg
	}
	return path + "." + seg
}

func flatten(n *yaml.Node, path string, out *[]report.PlatformParam) {
	switch n.Kind {
	case yaml.MappingNode:
		if v, s, ok := param(n); ok {
			*out = append(*out, report.PlatformParam{Path: path, Value: v, Source: s})
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			flatten(n.Content[i+1], join(path, n.Content[i].Value), out)
		}
	case yaml.SequenceNode:
		if len(n.Content) > 0 && n.Content[0].Kind == yaml.ScalarNode {
			// A row of scalars (a distance matrix's): one value.
			var vs []string
			for _, c := range n.Content {
				vs = append(vs, c.Value)
			}
			*out = append(*out, report.PlatformParam{Path: path, Value: fmt.Sprint(vs)})
			return
		}
		for i, c := range n.Content {
			seg := strconv.Itoa(i)
			if k := key(c, "name"); k != "" {
				seg = k
			} else if k := key(c, "id"); k != "" {
				seg = k
			}
			flatten(c, join(path, seg), out)
		}
	case yaml.ScalarNode:
		*out = append(*out, report.PlatformParam{Path: path, Value: n.Value})
	}
}

// param recognises a parameter written with its source: {value: V,
// source: S}.
func param(n *yaml.Node) (value, source string, ok bool) {
	if len(n.Content) != 4 || n.Content[0].Value != "value" || n.Content[2].Value != "source" ||
		n.Content[1].Kind != yaml.ScalarNode {
		return "", "", false
	}
	return n.Content[1].Value, n.Content[3].Value, true
}

func key(n *yaml.Node, k string) string {
	if n.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == k && n.Content[i+1].Kind == yaml.ScalarNode {
			return n.Content[i+1].Value
		}
	}
	return ""
}
