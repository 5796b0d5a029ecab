package platform

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/dmalab/dmalab/sim"
)

// Marshal writes a valid spec as YAML that Parse reads back to an equal
// Spec: sizes, rates and durations with units wherever the text is exact,
// a parameter with a source as {value: ..., source: ...}, zero optional
// values and empty lists left out. The output is deterministic.
func Marshal(s *Spec) ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(encodeSpec(s)); err != nil {
		return nil, fmt.Errorf("marshal platform %s: %w", s.Name, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("marshal platform %s: %w", s.Name, err)
	}
	return buf.Bytes(), nil
}

// encodeSpec builds the YAML node tree of s; Set edits it.
func encodeSpec(s *Spec) *yaml.Node { return encode(reflect.ValueOf(s).Elem()) }

func scalarNode(value string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Value: value}
}

func stringNode(value string) *yaml.Node {
	// The !!str tag makes the emitter quote strings that would read back
	// as something else ("null", "10", "true"). Strings with line breaks
	// or other control characters are double-quoted: yaml.v3 would write
	// them as literal blocks, which lose a string of only newlines.
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value}
	if strings.IndexFunc(value, unicode.IsControl) >= 0 {
		n.Style = yaml.DoubleQuotedStyle
	}
	return n
}

// sourceNode writes a source text double-quoted, so that every source in
// a file looks the same whatever characters it holds.
func sourceNode(value string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Style: yaml.DoubleQuotedStyle, Value: value}
}

// written reports whether Marshal writes field f of the struct v. Plain
// integers (ids, node numbers, gen, width) are always written, except a
// link's gen and width, which are zero only where its bandwidth replaces
// them, a GPU's node, which only an integrated GPU has, and a device's
// function, which only a device with a slot has; everything else (false
// included) is left out when zero.
func written(v reflect.Value, f field) bool {
	t, fv := v.Type(), v.Field(f.index)
	switch {
	case t == gpuType && f.name == "node":
		return v.Interface().(GPU).Integrated
	case t == devType && f.name == "function":
		return v.Interface().(Device).Slot != ""
	case !fv.IsZero():
		return true
	}
	return fv.Kind() == reflect.Int && t != linkType
}

func encode(v reflect.Value) *yaml.Node {
	t := v.Type()
	switch {
	case t.Implements(paramType):
		value := encode(v.Field(0))
		src := v.Field(1).String()
		if src == "" {
			return value
		}
		return &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle, Content: []*yaml.Node{
			stringNode("value"), value, stringNode("source"), sourceNode(src),
		}}
	case t.Kind() == reflect.Struct:
		n := &yaml.Node{Kind: yaml.MappingNode}
		for _, f := range schema[t] {
			if !written(v, f) {
				continue
			}
			n.Content = append(n.Content, stringNode(f.name), encode(v.Field(f.index)))
		}
		return n
	case t.Kind() == reflect.Slice:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		if t.Elem().Kind() == reflect.Int {
			n.Style = yaml.FlowStyle // a row of the distance matrix
		}
		for i := range v.Len() {
			n.Content = append(n.Content, encode(v.Index(i)))
		}
		return n
	}
	switch t {
	case timeType:
		return scalarNode(sim.Time(v.Int()).String())
	case bytesType:
		return scalarNode(Bytes(v.Int()).String())
	case rateType:
		return scalarNode(Rate(v.Float()).String())
	}
	switch t.Kind() {
	case reflect.String:
		return stringNode(v.String())
	case reflect.Bool:
		return scalarNode(strconv.FormatBool(v.Bool()))
	case reflect.Int, reflect.Int64:
		return scalarNode(strconv.FormatInt(v.Int(), 10))
	case reflect.Float64:
		return scalarNode(formatFloat(v.Float()))
	}
	panic("platform: no YAML encoding for " + t.String())
}
