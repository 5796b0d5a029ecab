package platform

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Set returns a copy of s with one field changed, for the CLI's
// --set platform.<path>=<value>. path is dotted YAML field names; list
// elements are addressed by index or by name (by id for nodes):
//
//	gpus.gpu0.copy_overhead=6us     gpus.0.link.gen=4
//	nodes.1.dram_bandwidth=200 GB/s fabric.cross_traffic=0.05
//	gpus.gpu0.vram.source="measured on node 7"
//
// value is read exactly as the same text in a platform file: setting a
// parameter keeps its source (address .value and .source to set either
// alone), and a list or mapping takes a YAML value
// (distances=[[10,12],[12,10]]). The result is validated like a file;
// s is never changed.
func Set(s *Spec, path, value string) (*Spec, error) {
	root := encodeSpec(s)
	n, t, where, err := walkPath(root, path)
	if err != nil {
		return nil, fmt.Errorf("set %s: %w", path, err)
	}
	if err := assign(n, t, value); err != nil {
		return nil, fmt.Errorf("set %s: %s: %w", path, where, err)
	}
	errs := &errorList{}
	out, lines := decodeSpec(root, errs)
	if errs.empty() {
		validate(out, errs, lines)
	}
	if err := errs.err(); err != nil {
		return nil, fmt.Errorf("set %s: %w", path, err)
	}
	return out, nil
}

// subField marks the target of a path ending in a parameter's .value or
// .source: t is the parameter's type, and assign edits only that part.
type subField struct {
	param reflect.Type
	name  string
}

// walkPath follows path through the node tree of a spec, creating
// mapping entries that Marshal left out (zero values) on the way. It
// returns the target node, its type (a reflect.Type or a subField) and
// its canonical field path, "gpus[0].vram".
func walkPath(root *yaml.Node, path string) (*yaml.Node, any, string, error) {
	if path == "" {
		return nil, nil, "", fmt.Errorf("%w: empty path (fields: %s)", ErrBadPath, fieldNames(specType))
	}
	segs := strings.Split(path, ".")
	n, t, where := root, specType, ""
	for i := 0; i < len(segs); i++ {
		seg := segs[i]
		here := where
		if here == "" {
			here = "the platform"
		}
		switch {
		case t.Implements(paramType):
			if (seg == "value" || seg == "source") && i == len(segs)-1 {
				return n, subField{t, seg}, join(where, seg), nil
			}
			return nil, nil, "", fmt.Errorf("%w: %s is a parameter: it has only value and source, not %q", ErrBadPath, here, seg)
		case t.Kind() == reflect.Struct:
			f, ok := lookupField(t, seg)
			if !ok {
				hint := ""
				if c := closest(t, seg); c != "" {
					hint = fmt.Sprintf("did you mean %q? ", c)
				}
				return nil, nil, "", fmt.Errorf("%w: %s has no field %q (%sfields: %s)", ErrBadPath, here, seg, hint, fieldNames(t))
			}
			n = entry(n, seg, t.Field(f.index).Type)
			t, where = t.Field(f.index).Type, join(where, seg)
		case t.Kind() == reflect.Slice:
			k, skip, err := element(n, t.Elem(), segs[i:], here)
			if err != nil {
				return nil, nil, "", err
			}
			n, t, where = n.Content[k], t.Elem(), fmt.Sprintf("%s[%d]", where, k)
			i += skip
		default:
			return nil, nil, "", fmt.Errorf("%w: %s is a value: it has no field %q", ErrBadPath, here, seg)
		}
	}
	return n, t, where, nil
}

// entry returns the value of key in mapping n, adding it when absent.
func entry(n *yaml.Node, key string, t reflect.Type) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		// A struct left out as zero inside a list element cannot occur
		// (Marshal writes mappings for structs), but a null is harmless
		// to replace.
		*n = yaml.Node{Kind: yaml.MappingNode}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	var v *yaml.Node
	switch {
	case t.Implements(paramType):
		v = scalarNode("")
	case t.Kind() == reflect.Struct:
		v = &yaml.Node{Kind: yaml.MappingNode}
	case t.Kind() == reflect.Slice:
		v = &yaml.Node{Kind: yaml.SequenceNode}
	default:
		v = scalarNode("")
	}
	n.Content = append(n.Content, stringNode(key), v)
	return v
}

// element finds the list element that segs start with: by name (names may
// contain dots, so the longest match wins), by id for nodes, or by index.
// skip is how many further segments the name used.
func element(n *yaml.Node, elem reflect.Type, segs []string, here string) (k, skip int, err error) {
	key := ""
	if _, ok := lookupField(elem, "name"); ok {
		key = "name"
	} else if _, ok := lookupField(elem, "id"); ok {
		key = "id"
	}
	if key != "" {
		for j := len(segs); j >= 1; j-- {
			want := strings.Join(segs[:j], ".")
			for i, e := range n.Content {
				if v := mapValue(e, key); v != nil && v.Value == want {
					return i, j - 1, nil
				}
			}
		}
	}
	if i, err := strconv.Atoi(segs[0]); err == nil && i >= 0 && i < len(n.Content) && segs[0] == strconv.Itoa(i) {
		return i, 0, nil
	}
	var names []string
	for _, e := range n.Content {
		if v := mapValue(e, key); v != nil {
			names = append(names, v.Value)
		}
	}
	have := fmt.Sprintf("indexes 0..%d", len(n.Content)-1)
	if len(n.Content) == 0 {
		have = "it is empty"
	} else if key == "name" {
		have = fmt.Sprintf("names %s, or indexes 0..%d", shortList(names), len(n.Content)-1)
	}
	return 0, 0, fmt.Errorf("%w: %s has no element %q (%s)", ErrBadPath, here, segs[0], have)
}

func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode || key == "" {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// assign puts value into the node n of type t.
func assign(n *yaml.Node, t any, value string) error {
	switch t := t.(type) {
	case subField:
		if n.Kind != yaml.MappingNode {
			old := *n
			*n = yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle, Content: []*yaml.Node{
				stringNode("value"), &old, stringNode("source"), stringNode(""),
			}}
		}
		target := entry(n, t.name, reflect.TypeFor[string]())
		if t.name == "source" {
			*target = *sourceNode(value)
		} else {
			*target = *scalarNode(value)
		}
		return nil
	case reflect.Type:
		switch {
		case t.Implements(paramType):
			if n.Kind == yaml.MappingNode {
				n = entry(n, "value", reflect.TypeFor[string]())
			}
			*n = *scalarNode(value)
		case t.Kind() == reflect.Struct || t.Kind() == reflect.Slice:
			var doc yaml.Node
			if err := yaml.Unmarshal([]byte(value), &doc); err != nil {
				msg := strings.TrimPrefix(err.Error(), "yaml: ")
				if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
					msg = m[2]
				}
				return fmt.Errorf("bad YAML value %q: %s", value, msg)
			}
			if len(doc.Content) == 0 {
				*n = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}
				return nil
			}
			clearLines(doc.Content[0])
			*n = *doc.Content[0]
		case t.Kind() == reflect.String:
			*n = *stringNode(value)
		default:
			*n = *scalarNode(value)
		}
	}
	return nil
}

// clearLines zeroes the positions of a value parsed from a --set
// argument, since they are not lines of any file.
func clearLines(n *yaml.Node) {
	n.Line, n.Column = 0, 0
	for _, c := range n.Content {
		clearLines(c)
	}
}
